"""Connections: the databases and servers users open sessions against."""

import uuid
from datetime import datetime

import pydantic
from pydantic import BaseModel, ConfigDict
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, new_id
from models.core.request_body import RequestBody

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


class Connection(SQLModel, table=True):
    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    name: str = Field(unique=True, max_length=128)
    type: str = Field(max_length=64)
    subtype: str = Field(default="", max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class ConnectionCreate(RequestBody):
    name: str = pydantic.Field(pattern=NAME_PATTERN)
    type: str = pydantic.Field(min_length=1, max_length=64)
    subtype: str = pydantic.Field(default="", max_length=64)


class ConnectionPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    type: str
    subtype: str
    created_at: datetime
