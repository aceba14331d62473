"""Sessions: a user's request to run something on a connection, reviewed when configured."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated

import pydantic
from pydantic import BaseModel
from sqlalchemy import BigInteger, Text
from sqlmodel import Field, SQLModel

from models.core.clock import utc_now
from models.core.db import UTCDateTime, enum_column, new_id
from models.core.request_body import MAX_DURATION_NS, JsonInt, RequestBody, max_utf8_bytes
from models.reviews.machine import ReviewStatus
from models.reviews.schema import MAX_REQUEST_REASON, ReviewPublic, ReviewType
from models.rules.schema import DEFAULT_ACCESS_DURATION_NS

MAX_SCRIPT_BYTES = 1_000_000

ScriptText = Annotated[
    str,
    # The character bound is stated for clients and checked first (it is cheap); the byte bound
    # is the one that matters.
    pydantic.Field(
        max_length=MAX_SCRIPT_BYTES, description=f"At most {MAX_SCRIPT_BYTES:,} bytes of UTF-8."
    ),
    max_utf8_bytes(MAX_SCRIPT_BYTES),
]


RequestReason = Annotated[
    str | None,
    pydantic.Field(
        max_length=MAX_REQUEST_REASON,
        description="Why access is needed, shown to the reviewers; a rule may require one.",
    ),
]


class GatewaySession(SQLModel, table=True):
    __tablename__ = "gateway_session"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    owner_id: uuid.UUID = Field(foreign_key="user.id", index=True)
    connection_id: uuid.UUID = Field(foreign_key="connection.id", index=True)
    connection_name: str = Field(max_length=128)
    script: str = Field(default="", sa_type=Text)
    type: ReviewType = Field(sa_type=enum_column(ReviewType))
    access_duration: int = Field(default=DEFAULT_ACCESS_DURATION_NS, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    executed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class SessionStatus(StrEnum):
    WAITING_REVIEW = "waiting_review"
    READY = "ready"
    DENIED = "denied"
    RUNNING = "running"


def session_status(review_status: ReviewStatus | None, executed_at: datetime | None) -> str:
    """Derive what the session is doing from its review and whether it ran."""
    if executed_at is not None or review_status is ReviewStatus.PROCESSING:
        return SessionStatus.RUNNING
    if review_status in (None, ReviewStatus.APPROVED):
        return SessionStatus.READY
    if review_status is ReviewStatus.PENDING:
        return SessionStatus.WAITING_REVIEW
    return SessionStatus.DENIED


class SessionCreate(RequestBody):
    connection: str = pydantic.Field(min_length=1, max_length=128)
    script: ScriptText = ""
    type: ReviewType = ReviewType.ONETIME
    access_duration: JsonInt = pydantic.Field(
        default=DEFAULT_ACCESS_DURATION_NS,
        gt=0,
        le=MAX_DURATION_NS,
        description="Nanoseconds; jit sessions only.",
    )
    reason: RequestReason = None


class SessionPublic(BaseModel):
    id: uuid.UUID
    connection: str
    type: ReviewType
    status: str
    script: str
    user_id: uuid.UUID
    access_duration: int
    review: ReviewPublic | None
    created_at: datetime
    executed_at: datetime | None
