from fastapi import APIRouter

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep
from models.connections import service as connection_service
from models.connections.schema import ConnectionCreate, ConnectionPublic

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/connections", tags=["connections"])


@router.post("", status_code=201)
def create_connection(request: ConnectionCreate, db: DbDep, user: CurrentUser) -> ConnectionPublic:
    """Register a connection (admins). Names are unique."""
    return connection_service.create_connection(db=db, actor=user, request=request)


@router.get("")
def list_connections(db: DbDep, user: CurrentUser) -> list[ConnectionPublic]:
    """Every connection, by name."""
    return connection_service.list_connections(db=db, actor=user)
