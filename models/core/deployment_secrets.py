"""Secrets of the whole deployment, kept sealed in the database so every replica has the same.

Replicas share the database and ``ACCESSGATE_SECRET_KEY`` and nothing else, so a key that must
be the same on all of them (the license signing key) lives here, sealed with the secret key.
Whichever process needs it first creates it; the others read that one, however many start at
the same moment (the insert does nothing when the name is taken).
"""

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Text
from sqlmodel import Field, Session, SQLModel

from models.core.db import UTCDateTime, insert_unless_present, write_transaction
from models.core.sealing import SecretBox


class DeploymentSecret(SQLModel, table=True):
    __tablename__ = "deployment_secret"

    name: str = Field(primary_key=True, max_length=100)
    sealed_value: str = Field(sa_type=Text)
    created_at: datetime = Field(sa_type=UTCDateTime)


def deployment_secret(
    *, db: Session, secret_box: SecretBox, name: str, create: Callable[[], bytes], now: datetime
) -> bytes:
    """The secret called ``name``; made with ``create()`` if no process made it yet."""
    stored = db.get(DeploymentSecret, name)
    if stored is None:
        sealed = secret_box.seal(create(), context=_context(name))
        with write_transaction(db):
            insert_unless_present(
                db, DeploymentSecret, key="name", name=name, sealed_value=sealed, created_at=now
            )
        stored = db.get_one(DeploymentSecret, name, populate_existing=True)
    return secret_box.open(stored.sealed_value, context=_context(name))


def replace_deployment_secret(
    *, db: Session, secret_box: SecretBox, name: str, value: bytes, now: datetime
) -> None:
    """Store ``value`` as the secret called ``name``, replacing any older one."""
    with write_transaction(db):
        stored = db.get(DeploymentSecret, name, with_for_update=True)
        if stored is None:
            stored = DeploymentSecret(name=name, sealed_value="", created_at=now)
        stored.sealed_value = secret_box.seal(value, context=_context(name))
        stored.created_at = now
        db.add(stored)


def _context(name: str) -> str:
    # Bound into the seal: a sealed value moved to another name does not open.
    return f"deployment_secret:{name}"
