from fastapi import APIRouter

from api.deps import CurrentUser, SessionDep
from models import connection_service
from models.connections import ConnectionCreate, ConnectionPublic

router = APIRouter(prefix="/connections", tags=["connections"])


@router.post("", status_code=201)
def create_connection(
    request: ConnectionCreate, session: SessionDep, user: CurrentUser
) -> ConnectionPublic:
    """Register a connection (admins). Names are unique."""
    connection = connection_service.create_connection(session=session, actor=user, request=request)
    return ConnectionPublic.model_validate(connection)


@router.get("")
def list_connections(session: SessionDep, user: CurrentUser) -> list[ConnectionPublic]:
    """Every connection, by name."""
    connections = connection_service.list_connections(session=session, actor=user)
    return [ConnectionPublic.model_validate(item) for item in connections]
