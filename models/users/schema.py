"""Organizations and users. A user is identified by the identity provider's ``sub``."""

import re
import uuid
from datetime import datetime
from enum import StrEnum

import pydantic
from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.config import JsonDict
from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, enum_column, new_id
from models.core.request_body import RequestBody

ADMIN_GROUP = "admin"
DEFAULT_ORGANIZATION = "default"
MAX_GROUP_NAME = 100


class UserStatus(StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"


class Organization(SQLModel, table=True):
    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class User(SQLModel, table=True):
    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    sub: str = Field(unique=True, max_length=255)
    email: str = Field(default="", max_length=320)
    name: str = Field(default="", max_length=200)
    groups: list[str] = Field(default_factory=list, sa_type=JSON)
    status: UserStatus = Field(default=UserStatus.ACTIVE, sa_type=enum_column(UserStatus))
    chat_id: str | None = Field(default=None, unique=True, max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    # Reminders as one direct message per interval, instead of a mention under every card;
    # digest_due_at is when the next one is sent (booked when a reminder falls due, never
    # sooner than an interval after digest_sent_at).
    reminders_by_dm: bool = False
    digest_due_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    digest_sent_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    @property
    def is_admin(self) -> bool:
        return ADMIN_GROUP in self.groups


# No whitespace, no control characters, no invisible or direction-changing format characters:
# a group name must read in a log, a card or a terminal as what it is.
GROUP_NAME = re.compile(
    "[^\\s\\x00-\\x1f\\x7f-\\x9f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u202a-\\u202e"
    "\\u2060-\\u2064\\u2066-\\u206f\\ufeff]" + f"{{1,{MAX_GROUP_NAME}}}"
)
GROUP_NAMES_SCHEMA: JsonDict = {"items": {"type": "string", "pattern": f"^{GROUP_NAME.pattern}$"}}
"""What the OpenAPI document says of every list of group names (the check below is the same)."""


def validate_group_names(groups: list[str]) -> list[str]:
    """Return the group names stripped and de-duplicated in order, or raise ValueError."""
    cleaned: list[str] = []
    for group in groups:
        name = group.strip()
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(
                f"group names are 1 to {MAX_GROUP_NAME} characters without spaces or control "
                f"characters: {group!r}"
            )
        if name not in cleaned:
            cleaned.append(name)
    return cleaned


class UserPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    sub: str
    email: str
    name: str
    groups: list[str]
    status: UserStatus
    chat_id: str | None
    organization_id: uuid.UUID
    created_at: datetime


class UserUpdate(RequestBody):
    """What an admin may change on a user; absent fields stay as they are."""

    status: UserStatus | None = None
    groups: list[str] | None = pydantic.Field(default=None, json_schema_extra=GROUP_NAMES_SCHEMA)
    chat_id: str | None = pydantic.Field(default=None, max_length=64)

    @field_validator("groups")
    @classmethod
    def _clean_groups(cls, groups: list[str] | None) -> list[str] | None:
        return None if groups is None else validate_group_names(groups)
