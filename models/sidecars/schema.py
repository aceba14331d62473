"""Sidecars: separate processes that authenticate with their own token and handshake (spec 4.3).

A sidecar's token is shown once, at creation, and stored only as a SHA-256 hash: tokens carry
256 random bits, so a fast hash is as strong as a slow one and keeps the handshake cheap.
Revoking a sidecar keeps its row (reviews it filed still name it) and frees its name.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

import pydantic
from pydantic import BaseModel, model_validator
from sqlalchemy import JSON, Index, String, text
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, new_id
from models.core.request_body import MAX_DURATION_NS, JsonInt, RequestBody
from models.reviews.schema import ReviewType
from models.rules.schema import DEFAULT_ACCESS_DURATION_NS
from models.sessions.schema import RequestReason, ScriptText

SIDECAR_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
MAX_VERSION_CHARS = 64
MAX_LISTENERS = 100


class Sidecar(SQLModel, table=True):
    __table_args__ = (
        Index(
            "uq_sidecar_active_name",
            "organization_id",
            "name",
            unique=True,
            sqlite_where=text("revoked_at IS NULL"),
            postgresql_where=text("revoked_at IS NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    name: str = Field(max_length=63)
    token_hash: str = Field(sa_type=String(64))
    version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)
    last_seen_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    config: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    configured_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    @property
    def listeners(self) -> list[dict[str, Any]]:
        """The listeners of the assigned configuration (none when unconfigured)."""
        return listeners_in(self.config)


def listeners_in(config: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The listeners of a stored configuration document (none when there is none)."""
    listeners: list[dict[str, Any]] = (config or {}).get("listeners", [])
    return listeners


@dataclass(frozen=True)
class AuthenticatedSidecar:
    """A live sidecar that proved its token: what its own requests may use."""

    id: uuid.UUID
    organization_id: uuid.UUID
    name: str
    config: dict[str, Any] | None

    @property
    def listeners(self) -> list[dict[str, Any]]:
        return listeners_in(self.config)


# -- requests ---------------------------------------------------------------------------------


class ListenerProtocol(StrEnum):
    POSTGRES = "postgres"
    MYSQL = "mysql"
    MSSQL = "mssql"
    MONGODB = "mongodb"
    ORACLEDB = "oracledb"
    SSH = "ssh"
    RDP = "rdp"
    HTTP = "http"
    TCP = "tcp"


class Listener(RequestBody):
    """One port the sidecar listens on, forwarding to a connection."""

    name: str = pydantic.Field(pattern=SIDECAR_NAME_PATTERN, description="Unique per sidecar.")
    connection: str = pydantic.Field(min_length=1, max_length=128, description="Its name.")
    protocol: ListenerProtocol
    port: JsonInt = pydantic.Field(ge=1, le=65535)


class SidecarConfig(RequestBody):
    """The configuration document a sidecar must serve (body of ``PUT /sidecars/{id}/config``)."""

    listeners: list[Listener] = pydantic.Field(max_length=MAX_LISTENERS)

    @model_validator(mode="after")
    def _distinct_names_and_ports(self) -> Self:
        names = [listener.name for listener in self.listeners]
        ports = [listener.port for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ValueError("listener names must be distinct")
        if len(set(ports)) != len(ports):
            raise ValueError("listener ports must be distinct")
        return self


class SidecarCreate(RequestBody):
    name: str = pydantic.Field(
        pattern=SIDECAR_NAME_PATTERN,
        description="1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.",
    )


class HandshakeRequest(RequestBody):
    """Body of ``POST /sidecars/handshake``."""

    version: str = pydantic.Field(
        min_length=1,
        max_length=MAX_VERSION_CHARS,
        description="The sidecar's version: 1 to 64 printable characters.",
    )

    @pydantic.field_validator("version")
    @classmethod
    def _printable(cls, version: str) -> str:
        if not version.isprintable():
            raise ValueError("the version must be printable characters only")
        return version


class SidecarReviewCreate(RequestBody):
    """A statement a sidecar intercepted on one of its listeners, to be reviewed."""

    listener_name: str = pydantic.Field(min_length=1, max_length=63)
    user: str = pydantic.Field(
        min_length=1, max_length=255, description="The `sub` of the user running the statement."
    )
    script: ScriptText = pydantic.Field(min_length=1)
    type: ReviewType = ReviewType.ONETIME
    access_duration: JsonInt = pydantic.Field(
        default=DEFAULT_ACCESS_DURATION_NS, gt=0, le=MAX_DURATION_NS
    )
    reason: RequestReason = None


# -- responses --------------------------------------------------------------------------------


class ListenerPublic(BaseModel):
    name: str
    connection: str
    protocol: str
    port: int


class SidecarConfigPublic(BaseModel):
    listeners: list[ListenerPublic]


class SidecarCreated(BaseModel):
    id: uuid.UUID
    name: str
    token: str = pydantic.Field(description="Shown only in this response; stored as a hash.")


class SidecarPublic(BaseModel):
    id: uuid.UUID
    name: str
    version: str | None
    last_seen_at: datetime | None
    listeners: list[ListenerPublic]
    configured_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None


class HandshakeResponse(BaseModel):
    id: uuid.UUID
    name: str
    version: str
    config: SidecarConfigPublic
    license: dict[str, Any] = pydantic.Field(
        description="The organization's signed license; verify it with its public key."
    )
