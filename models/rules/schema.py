"""Access request rules: which groups review sessions on which connections, and how."""

import uuid
from datetime import datetime
from typing import Annotated, Self

import pydantic
from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from sqlalchemy import JSON, BigInteger
from sqlmodel import Field, SQLModel

from models.connections.schema import NAME_PATTERN
from models.core.clock import utc_now
from models.core.db import UTCDateTime, new_id
from models.core.request_body import MAX_DURATION_NS, WHOLE_NUMBER, RequestBody
from models.users.schema import GROUP_NAMES_SCHEMA, validate_group_names

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
    distinct_approvers: bool = False
    no_self_force_approval: bool = False
    require_reason: bool = False
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


# Constraints inside the type (before WHOLE_NUMBER), so the OpenAPI document states them on the
# integer even though the field may be null.
ApprovalCount = Annotated[int, pydantic.Field(strict=True, ge=1, le=100), WHOLE_NUMBER]
Nanoseconds = Annotated[
    int,
    pydantic.Field(strict=True, gt=0, le=MAX_DURATION_NS, description="Nanoseconds."),
    WHOLE_NUMBER,
]


class AccessRequestRuleIn(RequestBody):
    """The whole rule, as created or replaced."""

    name: str = pydantic.Field(pattern=NAME_PATTERN)
    connections: list[str] = pydantic.Field(min_length=1, max_length=1000)
    approval_groups: list[str] = pydantic.Field(
        min_length=1, max_length=100, json_schema_extra=GROUP_NAMES_SCHEMA
    )
    force_approval_groups: list[str] = pydantic.Field(
        default_factory=list, max_length=100, json_schema_extra=GROUP_NAMES_SCHEMA
    )
    min_approvals: ApprovalCount | None = None
    access_max_duration: Nanoseconds | None = pydantic.Field(default=None)
    distinct_approvers: bool = pydantic.Field(
        default=False,
        strict=True,
        description="Each person's approval counts for one reviewer group only, however many "
        "of the review's groups they are in.",
    )
    no_self_force_approval: bool = pydantic.Field(
        default=False,
        strict=True,
        description="Nobody may force-approve their own session, admins included.",
    )
    require_reason: bool = pydantic.Field(
        default=False,
        strict=True,
        description="A request on these connections must say why it needs access (reason).",
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
    distinct_approvers: bool
    no_self_force_approval: bool
    require_reason: bool
    created_at: datetime
