"""Plugins, their top-level configuration and their per-connection configuration (spec 2.6).

A connection's ``config`` is the list of reviewer groups for the ``review`` plugin, the groups
allowed to open sessions for ``access_control``, and the channels to post cards in for ``chat``.
The top-level ``envvars`` are stored sealed (``models.core.sealing``) and never leave the service.
"""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Self

import pydantic
from pydantic import BaseModel, ConfigDict, model_validator
from sqlalchemy import JSON, UniqueConstraint
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, enum_column, new_id
from models.core.request_body import RequestBody
from models.plugins.config import PluginConfigIn

MAX_CONNECTION_CONFIG_ITEMS = 100
MAX_CONNECTION_CONFIG_ITEM = 255


class PluginName(StrEnum):
    AUDIT = "audit"
    ACCESS_CONTROL = "access_control"
    DLP = "dlp"
    INDEXER = "indexer"
    REVIEW = "review"
    RUNBOOKS = "runbooks"
    CHAT = "chat"
    WEBHOOKS = "webhooks"


class Plugin(SQLModel, table=True):
    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    name: PluginName = Field(unique=True, sa_type=enum_column(PluginName))
    config_id: uuid.UUID = Field(default_factory=new_id)
    # Variable name -> value sealed for (plugin id, name); see plugin_service.
    envvars: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class PluginConnection(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("plugin_id", "connection_id"),)

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    plugin_id: uuid.UUID = Field(foreign_key="plugin.id", index=True, ondelete="CASCADE")
    connection_id: uuid.UUID = Field(foreign_key="connection.id", index=True, ondelete="CASCADE")
    config: list[str] = Field(default_factory=list, sa_type=JSON)


class PluginConnectionIn(RequestBody):
    """A connection of a plugin, named by its id or its name."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [key], "properties": {key: {"type": "string"}}}
                for key in ("id", "name")
            ]
        }
    )

    id: uuid.UUID | None = None
    name: str | None = None
    config: list[str] = pydantic.Field(
        default_factory=list,
        max_length=MAX_CONNECTION_CONFIG_ITEMS,
        json_schema_extra={
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_CONNECTION_CONFIG_ITEM}
        },
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.id is None and self.name is None:
            raise ValueError("each connection needs its id or its name")
        for item in self.config:
            if not item or len(item) > MAX_CONNECTION_CONFIG_ITEM:
                raise ValueError(
                    f"connection config items are 1 to {MAX_CONNECTION_CONFIG_ITEM} characters"
                )
        return self


class PluginCreate(RequestBody):
    name: PluginName
    connections: list[PluginConnectionIn] = pydantic.Field(default_factory=list)
    config: PluginConfigIn | None = None


class PluginUpdate(RequestBody):
    """Body of ``PUT /plugins/{name}``: what ``GET`` answers can be sent back as it is.

    ``name`` must be the path's; ``id``, ``priority``, ``source`` and ``config.id`` are the
    service's own and are ignored; a ``config`` replaces the configuration, its REDACTED values
    keeping the stored ones.
    """

    connections: list[PluginConnectionIn]
    name: str | None = pydantic.Field(default=None, description="Must be the path's name.")
    config: PluginConfigIn | None = None
    id: uuid.UUID | None = pydantic.Field(default=None, description="Read-only; ignored.")
    priority: int | None = pydantic.Field(default=None, description="Read-only; ignored.")
    source: None = pydantic.Field(default=None, description="Read-only; ignored.")


class PluginConfigPublic(BaseModel):
    id: uuid.UUID
    envvars: dict[str, str] = pydantic.Field(
        description="Every configured variable, its value always shown as REDACTED."
    )


class PluginConnectionPublic(BaseModel):
    id: uuid.UUID
    name: str
    config: list[str]


class PluginPublic(BaseModel):
    id: uuid.UUID
    name: PluginName
    config: PluginConfigPublic
    connections: list[PluginConnectionPublic]
    priority: int = pydantic.Field(default=0, description="Deprecated; always 0.")
    source: None = pydantic.Field(default=None, description="Deprecated; always null.")
