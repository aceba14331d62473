"""Connections: created by admins, listed by everyone."""

from sqlmodel import Session, col, select

from models.connections import Connection, ConnectionCreate
from models.db import flush_or_conflict, write_transaction
from models.user_service import require_admin
from models.users import User


def create_connection(*, session: Session, actor: User, request: ConnectionCreate) -> Connection:
    """Create a connection; its name is unique. Commit."""
    require_admin(actor)
    with write_transaction(session):
        connection = Connection(organization_id=actor.organization_id, **request.model_dump())
        session.add(connection)
        flush_or_conflict(session, f"a connection named {request.name!r} already exists")
    return connection


def list_connections(*, session: Session, actor: User) -> list[Connection]:
    """Every connection of the actor's organization, by name."""
    statement = (
        select(Connection)
        .where(Connection.organization_id == actor.organization_id)
        .order_by(col(Connection.name))
    )
    return list(session.exec(statement))


def find_connection(*, session: Session, actor: User, name: str) -> Connection | None:
    """The connection called ``name`` in the actor's organization, if any."""
    statement = select(Connection).where(
        Connection.organization_id == actor.organization_id, Connection.name == name
    )
    return session.exec(statement).first()
