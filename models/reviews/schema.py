"""Reviews, their reviewer-group entries and the audit trail of decisions (spec 2.1-2.5)."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Self

import pydantic
from pydantic import (
    BaseModel,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from sqlalchemy import JSON, BigInteger, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, enum_column, new_id
from models.core.request_body import RequestBody
from models.reviews.machine import CLOCK_TIME, Decision, ReviewStatus, parse_clock_time
from models.rules.schema import DEFAULT_ACCESS_DURATION_NS

MAX_REJECTION_REASON = 1000
MAX_REQUEST_REASON = 1000


class ReviewType(StrEnum):
    ONETIME = "onetime"
    JIT = "jit"


class Door(StrEnum):
    """Where a decision came in."""

    API = "api"
    SLACK = "slack"
    PAGE = "page"  # the review page in a browser
    SYSTEM = "system"  # the service itself: a review that expired


class Review(SQLModel, table=True):
    # Lists walk these newest first by (created_at, id), so a page costs the same at any depth
    # and whatever the size of the table.
    __table_args__ = (
        Index("ix_review_listing", "organization_id", "created_at", "id"),
        Index("ix_review_listing_by_status", "organization_id", "status", "created_at", "id"),
        Index("ix_review_listing_by_owner", "owner_id", "created_at", "id"),
        # What the scheduler looks for: each rule reads only the rows that are due.
        Index("ix_review_due_expiry", "status", "expires_at"),
        Index("ix_review_due_reminder", "status", "next_reminder_at"),
        Index("ix_review_due_access_end", "status", "access_end_told", "revoke_at"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id")
    session_id: uuid.UUID = Field(foreign_key="gateway_session.id", unique=True)
    owner_id: uuid.UUID = Field(foreign_key="user.id")
    connection_name: str = Field(max_length=128)
    type: ReviewType = Field(sa_type=enum_column(ReviewType))
    status: ReviewStatus = Field(
        default=ReviewStatus.PENDING, sa_type=enum_column(ReviewStatus), index=True
    )
    min_approvals: int | None = None
    force_approval_groups: list[str] = Field(default_factory=list, sa_type=JSON)
    distinct_approvers: bool = False
    no_self_force_approval: bool = False
    time_window: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    time_window_set_by_id: uuid.UUID | None = Field(default=None, foreign_key="user.id")
    access_duration: int = Field(default=DEFAULT_ACCESS_DURATION_NS, sa_type=BigInteger)
    access_request_rule_name: str | None = Field(default=None, max_length=128)
    rejection_reason: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    revoke_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ended_by_id: uuid.UUID | None = Field(default=None, foreign_key="user.id")
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    listener_name: str | None = Field(default=None, max_length=128)
    sidecar_id: uuid.UUID | None = None
    reason: str | None = Field(default=None, sa_type=Text)
    # Time: a PENDING review is rejected at expires_at; its reviewers are reminded at
    # next_reminder_at (reminders_sent so far); a JIT grant's end (revoke_at) is told once.
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    next_reminder_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    reminders_sent: int = 0
    access_end_told: bool = False


class ReviewGroup(SQLModel, table=True):
    """One reviewer group's say on a review.

    ``organization_id``, ``review_created_at`` and ``review_status`` copy the review's (the
    first two never change; the status is copied on every change, by ``mirror_review_status``)
    so that a reviewer's reviews are walked newest first from this table's indexes alone,
    group by group, with or without a status filter.
    """

    __tablename__ = "review_group"
    __table_args__ = (
        UniqueConstraint("review_id", "group"),
        Index(
            "ix_review_group_listing",
            "organization_id",
            "group",
            "review_created_at",
            "review_id",
        ),
        Index(
            "ix_review_group_listing_by_status",
            "organization_id",
            "group",
            "review_status",
            "review_created_at",
            "review_id",
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    review_id: uuid.UUID = Field(foreign_key="review.id", index=True, ondelete="CASCADE")
    organization_id: uuid.UUID = Field(foreign_key="organization.id")
    review_created_at: datetime = Field(sa_type=UTCDateTime)
    review_status: ReviewStatus = Field(
        default=ReviewStatus.PENDING, sa_type=enum_column(ReviewStatus)
    )
    group: str = Field(max_length=100)
    status: ReviewStatus = Field(default=ReviewStatus.PENDING, sa_type=enum_column(ReviewStatus))
    reviewed_by_id: uuid.UUID | None = Field(default=None, foreign_key="user.id")
    review_date: datetime | None = Field(default=None, sa_type=UTCDateTime)
    forced_review: bool = False


class ReviewDecisionRecord(SQLModel, table=True):
    """One accepted decision: who, when, through which door, and what it did."""

    __tablename__ = "review_decision"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    review_id: uuid.UUID = Field(foreign_key="review.id", index=True, ondelete="CASCADE")
    actor_id: uuid.UUID | None = Field(default=None, foreign_key="user.id")  # None: the system
    door: Door = Field(sa_type=enum_column(Door))
    decision: Decision = Field(sa_type=enum_column(Decision))
    forced: bool = False
    groups: list[str] = Field(default_factory=list, sa_type=JSON)
    status_before: ReviewStatus = Field(sa_type=enum_column(ReviewStatus))
    status_after: ReviewStatus = Field(sa_type=enum_column(ReviewStatus))
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


# -- request ----------------------------------------------------------------------------------


class TimeWindow(RequestBody):
    """When an approved session may run (spec 2.2); clock times are UTC."""

    type: Literal["time_range"]
    configuration: dict[str, str] = pydantic.Field(
        json_schema_extra={
            "description": "UTC clock times; the window runs from start_time up to end_time, "
            "across midnight when end_time is earlier. They must differ.",
            "required": ["start_time", "end_time"],
            "additionalProperties": False,
            "properties": {
                name: {"type": "string", "pattern": f"^{CLOCK_TIME.pattern}$"}
                for name in ("start_time", "end_time")
            },
        }
    )

    @field_validator("configuration")
    @classmethod
    def _check_range(cls, configuration: dict[str, str]) -> dict[str, str]:
        missing = [key for key in ("start_time", "end_time") if key not in configuration]
        if missing:
            raise ValueError(f"time_range needs {' and '.join(missing)}")
        unknown = sorted(set(configuration) - {"start_time", "end_time"})
        if unknown:
            raise ValueError(f"time_range does not take {', '.join(unknown)}")
        start = parse_clock_time(configuration["start_time"])
        end = parse_clock_time(configuration["end_time"])
        if start == end:
            raise ValueError("start_time and end_time must differ")
        return configuration


class ReviewDecisionRequest(RequestBody):
    """Body of ``PUT /reviews/{id}`` (spec 2.1)."""

    status: Decision
    force_review: bool = pydantic.Field(default=False, strict=True)
    rejection_reason: str | None = pydantic.Field(default=None, max_length=MAX_REJECTION_REASON)
    time_window: TimeWindow | None = None

    @model_validator(mode="after")
    def _check_combination(self) -> Self:
        if self.time_window is not None and self.status is not Decision.APPROVED:
            raise ValueError("time_window is only accepted with status APPROVED")
        if self.rejection_reason and self.status is not Decision.REJECTED:
            raise ValueError("rejection_reason is only accepted with status REJECTED")
        return self


# -- responses --------------------------------------------------------------------------------


class ReviewOwnerPublic(BaseModel):
    id: uuid.UUID
    name: str
    email: str
    chat_id: str = pydantic.Field(description="The reviewer's chat user id; empty when not linked.")


class ReviewGroupPublic(BaseModel):
    id: uuid.UUID
    group: str
    status: ReviewStatus
    reviewed_by: ReviewOwnerPublic | None
    review_date: datetime | None
    forced_review: bool


class ReviewPublic(BaseModel):
    """A review as the API shows it (spec 2.3)."""

    id: uuid.UUID
    session: uuid.UUID
    type: ReviewType
    status: ReviewStatus
    review_groups_data: list[ReviewGroupPublic]
    min_approvals: int | None
    force_approval_groups: list[str]
    time_window: TimeWindow | None
    access_duration: int
    access_request_rule_name: str | None
    rejection_reason: str | None
    created_at: datetime
    revoke_at: datetime | None
    reason: str | None = pydantic.Field(
        default=None, description="Why the requester asks for access, in their words."
    )
    expires_at: datetime | None = pydantic.Field(
        default=None,
        description="When the review is rejected if still pending; null when reviews do not "
        "expire.",
    )
    listener_name: str | None = pydantic.Field(
        default=None, description="Absent when the review came from a connection."
    )
    sidecar_id: uuid.UUID | None = pydantic.Field(
        default=None, description="Absent when the review came from a connection."
    )

    @model_serializer(mode="wrap")
    def _omit_sidecar_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("listener_name", "sidecar_id"):
            if data.get(key) is None:
                data.pop(key, None)
        return data
