from fastapi import APIRouter

from api.deps import ChatDep, CredentialsFirstRoute, CurrentUser, DbDep, SecretBoxDep
from api.errors import more_error_responses
from models.chat.runtime import configuration_check, plugin_changed
from models.core import errors
from models.plugins import service as plugin_service
from models.plugins.config import PluginConfigIn
from models.plugins.schema import PluginCreate, PluginPublic, PluginUpdate

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/plugins", tags=["plugins"])

UNUSABLE_CONFIGURATION = more_error_responses(
    {422: "The plugin cannot run with this configuration (for chat: Slack refused the tokens)"}
)


@router.post("", status_code=201, responses=UNUSABLE_CONFIGURATION)
def create_plugin(
    request: PluginCreate,
    db: DbDep,
    user: CurrentUser,
    secret_box: SecretBoxDep,
    chat: ChatDep,
) -> PluginPublic:
    """Enable a plugin with its connections and, optionally, its configuration (admins)."""
    plugin = plugin_service.create_plugin(
        db=db,
        actor=user,
        request=request,
        secret_box=secret_box,
        live_check=configuration_check(chat),
    )
    plugin_changed(chat, plugin.name)
    return plugin


@router.get("")
def list_plugins(db: DbDep, user: CurrentUser) -> list[PluginPublic]:
    """Every enabled plugin (admins). Configuration values are shown as REDACTED."""
    return plugin_service.list_plugins(db=db, actor=user)


@router.get("/{name}")
def get_plugin(name: str, db: DbDep, user: CurrentUser) -> PluginPublic:
    """One plugin (admins). Configuration values are shown as REDACTED."""
    return plugin_service.get_plugin(db=db, actor=user, name=name)


@router.put("/{name}", responses=UNUSABLE_CONFIGURATION)
def update_plugin(
    name: str,
    request: PluginUpdate,
    db: DbDep,
    user: CurrentUser,
    secret_box: SecretBoxDep,
    chat: ChatDep,
) -> PluginPublic:
    """Replace the connections of a plugin (admins); for chat, each connection's channel ids.

    What `GET` answers may be sent back as it is: `name` must be the path's (400 otherwise),
    `id`, `priority`, `source` and `config.id` are ignored, and a `config` replaces the
    configuration as `PUT /plugins/{name}/config` does (REDACTED keeps a stored value).
    """
    if request.name is not None and request.name != name:
        raise errors.InvalidRequest(
            f"name: the body names plugin {request.name!r}, the path {name!r}; a plugin cannot "
            "be renamed"
        )
    plugin = plugin_service.update_plugin(
        db=db,
        actor=user,
        name=name,
        connections=request.connections,
        config=request.config,
        secret_box=secret_box,
        live_check=configuration_check(chat),
    )
    if request.config is not None:
        plugin_changed(chat, name)
    return plugin


@router.put("/{name}/config", responses=UNUSABLE_CONFIGURATION)
def update_plugin_config(
    name: str,
    request: PluginConfigIn,
    db: DbDep,
    user: CurrentUser,
    secret_box: SecretBoxDep,
    chat: ChatDep,
) -> PluginPublic:
    """Replace a plugin's top-level configuration (admins; spec 4.2).

    Values are standard base64, stored encrypted and shown as REDACTED. A refused
    configuration leaves the previous one in force. For chat, Slack is asked first: tokens it
    refuses get 422; if it cannot be reached, the configuration is stored and the bot retries.
    The bot switches to a stored configuration without a restart.
    """
    plugin = plugin_service.update_plugin_config(
        db=db,
        actor=user,
        name=name,
        request=request,
        secret_box=secret_box,
        live_check=configuration_check(chat),
    )
    plugin_changed(chat, name)
    return plugin


@router.delete("/{name}", status_code=204)
def delete_plugin(name: str, db: DbDep, user: CurrentUser, chat: ChatDep) -> None:
    """Disable a plugin, dropping its connections and configuration (admins); chat stops."""
    plugin_service.delete_plugin(db=db, actor=user, name=name)
    plugin_changed(chat, name)
