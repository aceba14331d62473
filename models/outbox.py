"""The transactional outbox: every review change leaves an event row in the same transaction.

Deliverers (the chat notifier, webhooks) read undelivered rows in ``id`` order and mark them
delivered; an event is never lost to a crash between "changed" and "told".
"""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON
from sqlmodel import Field, Session, SQLModel

from models.db import UTCDateTime, enum_column


class EventKind(StrEnum):
    REVIEW_CREATED = "review.created"
    REVIEW_UPDATED = "review.updated"


class OutboxEvent(SQLModel, table=True):
    __tablename__ = "outbox_event"

    id: int | None = Field(default=None, primary_key=True)
    kind: EventKind = Field(sa_type=enum_column(EventKind))
    review_id: uuid.UUID | None = Field(default=None, index=True)
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    attempts: int = 0
    last_error: str | None = Field(default=None, max_length=1000)


def record_event(
    session: Session,
    *,
    kind: EventKind,
    review_id: uuid.UUID,
    payload: dict[str, Any],
    now: datetime,
) -> None:
    """Add an event to the caller's transaction; it commits or rolls back with the change."""
    session.add(OutboxEvent(kind=kind, review_id=review_id, payload=payload, created_at=now))


def record_review_event(
    session: Session,
    *,
    kind: EventKind,
    review_id: uuid.UUID,
    session_id: uuid.UUID,
    status: str,
    now: datetime,
    details: dict[str, Any] | None = None,
) -> None:
    """Add the event of a review entering ``status``; ``details`` say who and how."""
    payload = {"review_id": str(review_id), "session_id": str(session_id), "status": status}
    record_event(
        session, kind=kind, review_id=review_id, payload={**payload, **(details or {})}, now=now
    )
