"""Plugins: their connections and their sealed top-level configuration."""

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlmodel import Session, col, delete, select

from models.audit.schema import AuditKind
from models.audit.service import actor_label, record_audit
from models.connections.schema import Connection
from models.core import errors
from models.core.clock import utc_now
from models.core.db import flush_or_conflict, write_transaction
from models.core.sealing import SecretBox
from models.core.signals import announce
from models.plugins.config import REDACTED, PluginConfigIn, check_runnable
from models.plugins.schema import (
    Plugin,
    PluginConfigPublic,
    PluginConnection,
    PluginConnectionIn,
    PluginConnectionPublic,
    PluginCreate,
    PluginName,
    PluginPublic,
)
from models.users.schema import User, validate_group_names
from models.users.service import require_admin
from models.webhooks.events import publish_event
from models.webhooks.schema import WebhookKind

# Asks the service a plugin talks to whether it accepts a configuration (the chat bot checks
# its tokens with Slack); raises UnusableConfiguration. Called before anything is stored.
LiveCheck = Callable[[PluginName, Mapping[str, bytes]], None]


def plugin_topic(name: str) -> str:
    """The change signal of a plugin: every replica re-reads its configuration on it."""
    return f"plugin:{name}"


def create_plugin(
    *,
    db: Session,
    actor: User,
    request: PluginCreate,
    secret_box: SecretBox,
    live_check: LiveCheck | None = None,
) -> PluginPublic:
    """Enable a plugin with its connections and configuration; each plugin exists once. Commit."""
    require_admin(actor)
    plugin = Plugin(organization_id=actor.organization_id, name=request.name)
    if request.config is not None:
        if request.config.kept():
            raise errors.InvalidRequest(
                f"envvars.{request.config.kept()[0]}: {REDACTED} keeps a stored value, and a new "
                "plugin has none; send the value in base64"
            )
        values = _runnable_values(request.name, request.config, live_check)
        plugin.envvars = _sealed(plugin, values, secret_box)
    with write_transaction(db):
        db.add(plugin)
        flush_or_conflict(db, f"the {request.name} plugin already exists")
        _replace_connections(db, actor, plugin, request.connections)
        announce(db, plugin_topic(plugin.name))
        _audit(
            db,
            AuditKind.PLUGIN_CREATED,
            actor,
            plugin,
            connections=[item.name or str(item.id) for item in request.connections],
            keys=sorted(plugin.envvars),
        )
    return plugin_view(db, plugin)


def update_plugin_config(
    *,
    db: Session,
    actor: User,
    name: str,
    request: PluginConfigIn,
    secret_box: SecretBox,
    live_check: LiveCheck | None = None,
) -> PluginPublic:
    """Replace a plugin's top-level configuration; a refused one leaves the old in force."""
    require_admin(actor)
    _get_plugin(db, actor, name)  # 404 before asking anyone about the values
    # Checked outside the transaction: a live check talks to another service, and no row lock
    # should wait on the network.
    stored = _kept_values(db, actor, name, request, secret_box)
    values = _runnable_values(PluginName(name), request, live_check, stored=stored)
    with write_transaction(db):
        plugin = _get_plugin(db, actor, name, for_update=True)
        _audit_config_change(db, actor, plugin, values, secret_box)
        plugin.envvars = _sealed(plugin, values, secret_box)
        db.add(plugin)
        announce(db, plugin_topic(plugin.name))
    return plugin_view(db, plugin)


def _audit(db: Session, kind: AuditKind, actor: User, plugin: Plugin, **details: Any) -> None:
    record_audit(
        db,
        kind=kind,
        actor=actor,
        door="api",
        target=f"plugin:{plugin.name}",
        now=utc_now(),
        details=details,
    )


def _audit_config_change(
    db: Session, actor: User, plugin: Plugin, values: Mapping[str, bytes], secret_box: SecretBox
) -> None:
    """Which variables the new configuration adds, removes and changes: names, never values."""
    before = {
        key: secret_box.open(sealed, context=_seal_context(plugin, key))
        for key, sealed in plugin.envvars.items()
    }
    changes = {
        "added": sorted(set(values) - set(before)),
        "removed": sorted(set(before) - set(values)),
        "changed": sorted(key for key in set(values) & set(before) if values[key] != before[key]),
    }
    _audit(db, AuditKind.PLUGIN_CONFIG_CHANGED, actor, plugin, **changes)
    publish_event(
        db,
        kind=WebhookKind.PLUGIN_CONFIG_CHANGED,
        organization_id=plugin.organization_id,
        now=utc_now(),
        data={"plugin": plugin.name, "actor": actor_label(actor), **changes},
    )


def delete_plugin(*, db: Session, actor: User, name: str) -> None:
    """Disable a plugin: its connections and configuration go with it. Commit."""
    require_admin(actor)
    with write_transaction(db):
        plugin = _get_plugin(db, actor, name, for_update=True)
        db.exec(delete(PluginConnection).where(col(PluginConnection.plugin_id) == plugin.id))
        db.delete(plugin)
        announce(db, plugin_topic(plugin.name))
        _audit(db, AuditKind.PLUGIN_DELETED, actor, plugin)


def plugin_envvars(
    *, db: Session, organization_id: uuid.UUID, name: PluginName, secret_box: SecretBox
) -> dict[str, bytes] | None:
    """The decrypted configuration of a plugin, or None if it is not enabled.

    For the in-process users of a plugin (the chat bot reads its tokens here); the API never
    returns these values.
    """
    plugin = db.exec(
        select(Plugin).where(Plugin.organization_id == organization_id, Plugin.name == name)
    ).first()
    if plugin is None:
        return None
    return {
        key: secret_box.open(sealed, context=_seal_context(plugin, key))
        for key, sealed in plugin.envvars.items()
    }


def _kept_values(
    db: Session, actor: User, name: str, config: PluginConfigIn, secret_box: SecretBox
) -> dict[str, bytes]:
    """The stored values of the variables sent back as REDACTED; 400 for one never stored."""
    kept = config.kept()
    if not kept:
        return {}
    stored = (
        plugin_envvars(
            db=db,
            organization_id=actor.organization_id,
            name=PluginName(name),
            secret_box=secret_box,
        )
        or {}
    )
    missing = [key for key in kept if key not in stored]
    if missing:
        raise errors.InvalidRequest(
            f"envvars.{missing[0]}: {REDACTED} keeps the stored value, and {missing[0]} has none; "
            "send its value in base64"
        )
    return {key: stored[key] for key in kept}


def _runnable_values(
    name: PluginName,
    config: PluginConfigIn,
    live_check: LiveCheck | None,
    stored: Mapping[str, bytes] | None = None,
) -> dict[str, bytes]:
    values = {**config.decoded(), **(stored or {})}
    check_runnable(name, values)
    if live_check is not None:
        live_check(name, values)
    return values


def _sealed(plugin: Plugin, values: Mapping[str, bytes], secret_box: SecretBox) -> dict[str, str]:
    return {
        key: secret_box.seal(value, context=_seal_context(plugin, key))
        for key, value in values.items()
    }


def _seal_context(plugin: Plugin, key: str) -> str:
    # Bound to the plugin row and the variable: a value moved elsewhere does not open.
    return f"plugin:{plugin.id}:{key}"


def update_plugin(
    *,
    db: Session,
    actor: User,
    name: str,
    connections: list[PluginConnectionIn],
    config: PluginConfigIn | None = None,
    secret_box: SecretBox | None = None,
    live_check: LiveCheck | None = None,
) -> PluginPublic:
    """Replace the connections of a plugin, and its configuration when ``config`` is given
    (``secret_box`` then seals it), in one transaction: a refusal changes neither. Commit."""
    require_admin(actor)
    _get_plugin(db, actor, name)  # 404 before asking anyone about the values
    values = None
    if config is not None:
        if secret_box is None:
            raise ValueError("a configuration is sealed with the secret box")
        stored = _kept_values(db, actor, name, config, secret_box)
        values = _runnable_values(PluginName(name), config, live_check, stored=stored)
    with write_transaction(db):
        plugin = _get_plugin(db, actor, name, for_update=True)
        _replace_connections(db, actor, plugin, connections)
        _audit(
            db,
            AuditKind.PLUGIN_UPDATED,
            actor,
            plugin,
            connections=[item.name or str(item.id) for item in connections],
        )
        if values is not None and secret_box is not None:
            _audit_config_change(db, actor, plugin, values, secret_box)
            plugin.envvars = _sealed(plugin, values, secret_box)
            db.add(plugin)
            announce(db, plugin_topic(plugin.name))
    return plugin_view(db, plugin)


def get_plugin(*, db: Session, actor: User, name: str) -> PluginPublic:
    """One plugin, by name."""
    require_admin(actor)
    return plugin_view(db, _get_plugin(db, actor, name))


def list_plugins(*, db: Session, actor: User) -> list[PluginPublic]:
    """Every plugin of the actor's organization, by name."""
    require_admin(actor)
    plugins = db.exec(
        select(Plugin)
        .where(Plugin.organization_id == actor.organization_id)
        .order_by(col(Plugin.name))
    )
    return [plugin_view(db, plugin) for plugin in plugins]


def access_control_groups(
    *, db: Session, organization_id: uuid.UUID, connection_id: uuid.UUID
) -> list[str] | None:
    """Groups that may open sessions on a connection; None when access control is off.

    With the access_control plugin enabled, a connection it does not list is open to no group.
    """
    # One query: the plugin's row (is it enabled?) with this connection's entry, if any.
    row = db.exec(
        select(Plugin.id, PluginConnection.config)
        .outerjoin(
            PluginConnection,
            (col(PluginConnection.plugin_id) == Plugin.id)
            & (col(PluginConnection.connection_id) == connection_id),
        )
        .where(Plugin.organization_id == organization_id, Plugin.name == PluginName.ACCESS_CONTROL)
    ).first()
    if row is None:
        return None
    return list(row[1] or [])


def plugin_connection_config(
    *, db: Session, plugin_name: PluginName, connection_id: uuid.UUID
) -> list[str] | None:
    """The config a plugin holds for one connection, or None when the plugin does not cover it."""
    statement = (
        select(PluginConnection.config)
        .join(Plugin, col(Plugin.id) == PluginConnection.plugin_id)
        .where(Plugin.name == plugin_name, PluginConnection.connection_id == connection_id)
    )
    config = db.exec(statement).first()
    return None if config is None else list(config)


def _get_plugin(db: Session, actor: User, name: str, *, for_update: bool = False) -> Plugin:
    if name not in PluginName.__members__.values():
        raise errors.NotFound(f"there is no plugin called {name!r}")
    statement = select(Plugin).where(
        Plugin.organization_id == actor.organization_id, Plugin.name == name
    )
    plugin = db.exec(statement.with_for_update() if for_update else statement).first()
    if plugin is None:
        raise errors.NotFound(f"the {name} plugin has not been created yet")
    return plugin


# Plugins whose per-connection config is a list of group names.
GROUP_CONFIG_PLUGINS = frozenset({PluginName.REVIEW, PluginName.ACCESS_CONTROL})


def _replace_connections(
    db: Session, actor: User, plugin: Plugin, connections: list[PluginConnectionIn]
) -> None:
    resolved: dict[uuid.UUID, list[str]] = {}
    for item in connections:
        connection = _resolve_connection(db, actor, item)
        if connection.id in resolved:
            raise errors.InvalidRequest(f"connection {connection.name!r} is listed more than once")
        resolved[connection.id] = _checked_config(plugin.name, connection.name, item.config)
    db.exec(delete(PluginConnection).where(col(PluginConnection.plugin_id) == plugin.id))
    for connection_id, config in resolved.items():
        db.add(PluginConnection(plugin_id=plugin.id, connection_id=connection_id, config=config))


def _checked_config(plugin_name: PluginName, connection_name: str, config: list[str]) -> list[str]:
    if plugin_name not in GROUP_CONFIG_PLUGINS:
        return config
    try:
        return validate_group_names(config)
    except ValueError as exc:
        raise errors.InvalidRequest(f"connection {connection_name!r}: {exc}") from exc


def _resolve_connection(db: Session, actor: User, item: PluginConnectionIn) -> Connection:
    statement = select(Connection).where(Connection.organization_id == actor.organization_id)
    if item.id is not None:
        statement = statement.where(Connection.id == item.id)
    if item.name is not None:
        statement = statement.where(Connection.name == item.name)
    connection = db.exec(statement).first()
    if connection is None:
        raise errors.InvalidRequest(f"no connection matches {item.name or item.id}")
    return connection


def plugin_view(db: Session, plugin: Plugin) -> PluginPublic:
    """Render a plugin with its connections."""
    rows = db.exec(
        select(PluginConnection, Connection)
        .join(Connection, col(Connection.id) == PluginConnection.connection_id)
        .where(PluginConnection.plugin_id == plugin.id)
        .order_by(col(Connection.name))
    ).all()
    return PluginPublic(
        id=plugin.id,
        name=plugin.name,
        config=PluginConfigPublic(
            id=plugin.config_id, envvars=dict.fromkeys(sorted(plugin.envvars), REDACTED)
        ),
        connections=[
            PluginConnectionPublic(id=connection.id, name=connection.name, config=link.config)
            for link, connection in rows
        ],
    )
