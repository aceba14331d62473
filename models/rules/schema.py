"""Access request rules: which groups review sessions on which connections, and how."""

import uuid
from datetime import datetime
from typing import Self

import pydantic
from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from sqlalchemy import JSON, BigInteger
from sqlmodel import Field, SQLModel

from models.connections.schema import NAME_PATTERN
from models.core.clock import utc_now
from models.core.db import UTCDateTime, new_id
from models.core.request_body import MAX_DURATION_NS, RequestBody
from models.users.schema import validate_group_names

DEFAULT_ACCESS_DURATION_NS = 1_800_000_000_000
"""Thirty minutes, in nanoseconds (spec 2.3)."""


class AccessRequestRule(SQLModel, table=True):
    __tablename__ = "access_request_rule"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    name: str = Field(unique=True, max_length=128)
    connections: list[str] = Field(default_factory=list, sa_type=JSON)
    approval_groups: list[str] = Field(default_factory=list, sa_type=JSON)
    force_approval_groups: list[str] = Field(default_factory=list, sa_type=JSON)
    min_approvals: int | None = None
    access_max_duration: int | None = Field(default=None, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class AccessRequestRuleIn(RequestBody):
    """The whole rule, as created or replaced."""

    name: str = pydantic.Field(pattern=NAME_PATTERN)
    connections: list[str] = pydantic.Field(min_length=1, max_length=1000)
    approval_groups: list[str] = pydantic.Field(min_length=1, max_length=100)
    force_approval_groups: list[str] = pydantic.Field(default_factory=list, max_length=100)
    min_approvals: int | None = pydantic.Field(default=None, strict=True, ge=1, le=100)
    access_max_duration: int | None = pydantic.Field(
        default=None, strict=True, gt=0, le=MAX_DURATION_NS, description="Nanoseconds."
    )

    @field_validator("approval_groups", "force_approval_groups")
    @classmethod
    def _clean_groups(cls, groups: list[str]) -> list[str]:
        return validate_group_names(groups)

    @model_validator(mode="after")
    def _unique_connections(self) -> Self:
        if len(set(self.connections)) != len(self.connections):
            raise ValueError("connections are listed more than once")
        return self


class AccessRequestRulePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    connections: list[str]
    approval_groups: list[str]
    force_approval_groups: list[str]
    min_approvals: int | None
    access_max_duration: int | None
    created_at: datetime
