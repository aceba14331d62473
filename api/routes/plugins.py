from fastapi import APIRouter

from api.deps import CurrentUser, SecretBoxDep, SessionDep
from api.errors import more_error_responses
from models import plugin_service
from models.plugin_config import PluginConfigIn
from models.plugins import PluginCreate, PluginPublic, PluginUpdate

router = APIRouter(prefix="/plugins", tags=["plugins"])

UNUSABLE_CONFIGURATION = more_error_responses(
    {422: "The plugin cannot run with this configuration"}
)


@router.post("", status_code=201, responses=UNUSABLE_CONFIGURATION)
def create_plugin(
    request: PluginCreate, session: SessionDep, user: CurrentUser, secret_box: SecretBoxDep
) -> PluginPublic:
    """Enable a plugin with its connections and, optionally, its configuration (admins)."""
    return plugin_service.create_plugin(
        session=session, actor=user, request=request, secret_box=secret_box
    )


@router.get("")
def list_plugins(session: SessionDep, user: CurrentUser) -> list[PluginPublic]:
    """Every enabled plugin (admins). Configuration values are shown as REDACTED."""
    return plugin_service.list_plugins(session=session, actor=user)


@router.get("/{name}")
def get_plugin(name: str, session: SessionDep, user: CurrentUser) -> PluginPublic:
    """One plugin (admins). Configuration values are shown as REDACTED."""
    return plugin_service.get_plugin(session=session, actor=user, name=name)


@router.put("/{name}")
def update_plugin(
    name: str, request: PluginUpdate, session: SessionDep, user: CurrentUser
) -> PluginPublic:
    """Replace the connections of a plugin (admins)."""
    return plugin_service.update_plugin(
        session=session, actor=user, name=name, connections=request.connections
    )


@router.put("/{name}/config", responses=UNUSABLE_CONFIGURATION)
def update_plugin_config(
    name: str,
    request: PluginConfigIn,
    session: SessionDep,
    user: CurrentUser,
    secret_box: SecretBoxDep,
) -> PluginPublic:
    """Replace a plugin's top-level configuration (admins; spec 4.2).

    Values are standard base64, stored encrypted and shown as REDACTED. A refused
    configuration leaves the previous one in force.
    """
    return plugin_service.update_plugin_config(
        session=session, actor=user, name=name, request=request, secret_box=secret_box
    )


@router.delete("/{name}", status_code=204)
def delete_plugin(name: str, session: SessionDep, user: CurrentUser) -> None:
    """Disable a plugin, dropping its connections and configuration (admins)."""
    plugin_service.delete_plugin(session=session, actor=user, name=name)
