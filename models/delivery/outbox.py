"""The transactional outbox: every review change leaves an event row in the same transaction.

The chat notifier leases undelivered rows (``models.delivery.leases``) in ``id`` order and marks
them delivered; an event is never lost to a crash between "changed" and "told". A webhooks
deliverer would need a delivery mark of its own.

Writers tell in-process readers that rows were committed through ``on_committed_events``, so
delivery starts at once instead of at the next poll.
"""

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Index, String, event, insert, text
from sqlmodel import Field, Session, SQLModel

from models.core.db import UTCDateTime, enum_column, table_of


class EventKind(StrEnum):
    REVIEW_CREATED = "review.created"
    REVIEW_UPDATED = "review.updated"
    # Written by the scheduler (models.scheduler.rules).
    REVIEW_REMINDER = "review.reminder"
    REVIEW_ACCESS_ENDED = "review.access_ended"
    # A reviewer's digest of reminders; its review_id column holds the reviewer's user id, so
    # one reviewer's digests are delivered in order.
    REMINDER_DIGEST = "chat.reminder_digest"
    # Written by the chat notifier, in the transaction that marks a final decision delivered:
    # telling the requester goes at the pace of their DM channel, apart from the cards.
    DIRECT_MESSAGE = "chat.direct_message"


# Only undelivered events are ever looked for by deliverers: partial indexes stay as small as the
# backlog, however many delivered events the table keeps until they are pruned.
UNDELIVERED = text("delivered_at IS NULL")


class OutboxEvent(SQLModel, table=True):
    __tablename__ = "outbox_event"
    __table_args__ = (
        Index(
            "ix_outbox_event_undelivered",
            "id",
            sqlite_where=UNDELIVERED,
            postgresql_where=UNDELIVERED,
        ),
        Index(
            "ix_outbox_event_undelivered_review",
            "review_id",
            "id",
            sqlite_where=UNDELIVERED,
            postgresql_where=UNDELIVERED,
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: EventKind = Field(sa_type=enum_column(EventKind))
    review_id: uuid.UUID | None = Field(default=None, index=True)
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    attempts: int = 0
    last_error: str | None = Field(default=None, max_length=1000)
    # Backoff after a failed delivery, and the lease of the process delivering it now.
    next_attempt_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    leased_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # Fencing: which lease this is. A deliverer whose lease ran out (and was taken by another)
    # can no longer mark, postpone or post for the event: its token no longer matches.
    lease_token: str | None = Field(default=None, sa_type=String(32))
    # A failed event an admin asked to deliver again: the id of the copy queued for it.
    retried_as: int | None = None


def record_event(
    db: Session,
    *,
    kind: EventKind,
    review_id: uuid.UUID,
    payload: dict[str, Any],
    now: datetime,
) -> OutboxEvent:
    """Add an event to the caller's transaction; it commits or rolls back with the change."""
    event = OutboxEvent(kind=kind, review_id=review_id, payload=payload, created_at=now)
    db.add(event)
    db.info[_HAS_NEW_EVENTS] = True
    return event


_INSERT_EVENT = insert(table_of(OutboxEvent))


def record_review_event(
    db: Session,
    *,
    kind: EventKind,
    review_id: uuid.UUID,
    session_id: uuid.UUID,
    status: str,
    now: datetime,
    details: dict[str, Any] | None = None,
) -> None:
    """Add the event of a review entering ``status``; ``details`` say who and how.

    Inserted at once with a Core statement (decisions are the hot path): nothing of the event
    is needed afterwards, so no ORM object is made for it.
    """
    payload = {"review_id": str(review_id), "session_id": str(session_id), "status": status}
    db.execute(
        _INSERT_EVENT,
        {
            "kind": kind,
            "review_id": review_id,
            "payload": {**payload, **(details or {})},
            "created_at": now,
            "attempts": 0,
        },
    )
    db.info[_HAS_NEW_EVENTS] = True


# -- telling readers in this process -----------------------------------------------------------


def note_new_events(db: Session) -> None:
    """The caller's transaction adds events other deliverers (webhooks) wait for: wake them
    when it commits."""
    db.info[_HAS_NEW_EVENTS] = True


_HAS_NEW_EVENTS = "accessgate_outbox_has_new_events"
_listeners: list[Callable[[], None]] = []
_listeners_lock = threading.Lock()


def on_committed_events(listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener`` (from the committing thread) after each commit that added events.

    Returns a function that removes the listener. Listeners must be quick and thread-safe.
    """
    with _listeners_lock:
        _listeners.append(listener)

    def remove() -> None:
        with _listeners_lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


@event.listens_for(Session, "after_commit")
def _tell_listeners(db: Session) -> None:
    if not db.info.pop(_HAS_NEW_EVENTS, False):
        return
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener()


@event.listens_for(Session, "after_rollback")
def _forget_rolled_back_events(db: Session) -> None:
    db.info.pop(_HAS_NEW_EVENTS, None)
