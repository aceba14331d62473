"""Connections: created by admins, listed by everyone."""

from sqlmodel import Session, col, select

from models.connections.schema import Connection, ConnectionCreate, ConnectionPublic
from models.core.db import flush_or_conflict, write_transaction
from models.users.schema import User
from models.users.service import require_admin


def create_connection(*, db: Session, actor: User, request: ConnectionCreate) -> ConnectionPublic:
    """Create a connection; its name is unique. Commit."""
    require_admin(actor)
    with write_transaction(db):
        connection = Connection(organization_id=actor.organization_id, **request.model_dump())
        db.add(connection)
        flush_or_conflict(db, f"a connection named {request.name!r} already exists")
    return ConnectionPublic.model_validate(connection)


def list_connections(*, db: Session, actor: User) -> list[ConnectionPublic]:
    """Every connection of the actor's organization, by name."""
    statement = (
        select(Connection)
        .where(Connection.organization_id == actor.organization_id)
        .order_by(col(Connection.name))
    )
    return [ConnectionPublic.model_validate(item) for item in db.exec(statement)]


def find_connection(*, db: Session, actor: User, name: str) -> Connection | None:
    """The connection called ``name`` in the actor's organization, if any."""
    statement = select(Connection).where(
        Connection.organization_id == actor.organization_id, Connection.name == name
    )
    return db.exec(statement).first()
