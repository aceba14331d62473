from fastapi import APIRouter

from api.deps import CurrentUser, SessionDep
from models import plugin_service
from models.plugins import PluginCreate, PluginPublic, PluginUpdate

router = APIRouter(prefix="/plugins", tags=["plugins"])


@router.post("", status_code=201)
def create_plugin(request: PluginCreate, session: SessionDep, user: CurrentUser) -> PluginPublic:
    """Enable a plugin with its connections (admins)."""
    return plugin_service.create_plugin(session=session, actor=user, request=request)


@router.get("")
def list_plugins(session: SessionDep, user: CurrentUser) -> list[PluginPublic]:
    """Every enabled plugin (admins)."""
    return plugin_service.list_plugins(session=session, actor=user)


@router.get("/{name}")
def get_plugin(name: str, session: SessionDep, user: CurrentUser) -> PluginPublic:
    """One plugin (admins)."""
    return plugin_service.get_plugin(session=session, actor=user, name=name)


@router.put("/{name}")
def update_plugin(
    name: str, request: PluginUpdate, session: SessionDep, user: CurrentUser
) -> PluginPublic:
    """Replace the connections of a plugin (admins)."""
    return plugin_service.update_plugin(
        session=session, actor=user, name=name, connections=request.connections
    )
