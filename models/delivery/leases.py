"""Leases on outbox events: which deliverer works on which event, and until when.

Rules kept here, whatever consumer does the delivering:

- events of one review are delivered one after the other, oldest first, within each lane (a
  lane is a set of event kinds): an event is offered only when no older event of its review and
  lane is still undelivered, so one lane waiting (for a chat service's pace, say) never holds
  back another;
- an event is leased to one deliverer at a time (``leased_until``), so several processes can
  share the outbox without delivering an event twice while it is being worked on.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from models.core.db import write_transaction
from models.delivery.outbox import EventKind, OutboxEvent, record_event

MAX_ERROR_LENGTH = 1000


@dataclass(frozen=True)
class LeasedEvent:
    id: int
    kind: str
    review_id: uuid.UUID
    payload: dict[str, object]
    created_at: datetime
    attempts: int


LEASED_COLUMNS = [
    OutboxEvent.__table__.c[name]  # type: ignore[attr-defined]
    for name in (
        "id",
        "kind",
        "review_id",
        "payload",
        "created_at",
        "attempts",
    )
]


def lease_deliverable_events(
    *, db: Session, now: datetime, limit: int, kinds: Sequence[EventKind], lease: timedelta
) -> list[LeasedEvent]:
    """Lease up to ``limit`` due events of one lane (``kinds``), the oldest of each review."""
    older = aliased(OutboxEvent)
    older_pending = exists().where(
        col(older.review_id) == col(OutboxEvent.review_id),
        col(older.kind).in_(kinds),
        col(older.delivered_at).is_(None),
        col(older.id) < col(OutboxEvent.id),
    )
    lease_is_free = or_(
        col(OutboxEvent.leased_until).is_(None), col(OutboxEvent.leased_until) <= now
    )
    due = (
        select(OutboxEvent.id)
        .where(
            col(OutboxEvent.delivered_at).is_(None),
            col(OutboxEvent.review_id).is_not(None),
            or_(
                col(OutboxEvent.next_attempt_at).is_(None), col(OutboxEvent.next_attempt_at) <= now
            ),
            col(OutboxEvent.kind).in_(kinds),
            lease_is_free,
            ~older_pending,
        )
        .order_by(col(OutboxEvent.id))
        .limit(limit)
    )
    candidates = [event_id for event_id in db.exec(due) if event_id is not None]
    if not candidates:
        db.rollback()  # end the read transaction: SQLite readers pin the WAL
        return []
    with write_transaction(db):
        # Leases are taken only where nobody took one since the read: each row has one winner
        # (PostgreSQL re-checks the condition on rows another transaction just leased).
        taken = (
            db.connection()
            .execute(
                update(OutboxEvent)
                .where(
                    col(OutboxEvent.id).in_(candidates),
                    col(OutboxEvent.delivered_at).is_(None),
                    lease_is_free,
                )
                .values(leased_until=now + lease)
                .returning(*LEASED_COLUMNS)
            )
            .all()
        )
    leased = [
        LeasedEvent(
            id=row.id,
            kind=EventKind(row.kind).value,
            review_id=row.review_id,
            payload=dict(row.payload),
            created_at=row.created_at,
            attempts=row.attempts,
        )
        for row in taken
    ]
    return sorted(leased, key=lambda event: event.id)


def mark_delivered(
    *,
    db: Session,
    event_id: int,
    now: datetime,
    note: str | None = None,
    direct_message: tuple[uuid.UUID, str] | None = None,
) -> None:
    """The event is done (``note`` says what could not be delivered and will not be retried).

    ``direct_message`` (review id, status entered) queues the requester's DM in the same
    transaction, so it is neither lost nor queued twice.
    """
    with write_transaction(db):
        _end_lease_now(
            db,
            [event_id],
            delivered_at=now,
            last_error=None if note is None else note[:MAX_ERROR_LENGTH],
        )
        if direct_message is not None:
            review_id, status = direct_message
            record_event(
                db,
                kind=EventKind.DIRECT_MESSAGE,
                review_id=review_id,
                payload={"review_id": str(review_id), "status": status},
                now=now,
            )


def reschedule(*, db: Session, event_id: int, at: datetime) -> None:
    """Deliver the event at ``at``, its turn in Slack's pace; not a failed attempt."""
    _end_lease(db, [event_id], next_attempt_at=at)


def postpone(*, db: Session, event_id: int, now: datetime, delay: timedelta, error: str) -> None:
    """Delivery failed for now: count the attempt and try again after ``delay``."""
    _end_lease(
        db,
        [event_id],
        attempts=OutboxEvent.attempts + 1,
        last_error=error[:MAX_ERROR_LENGTH],
        next_attempt_at=now + delay,
    )


def release_leases(*, db: Session, event_ids: Sequence[int]) -> None:
    """Give events back without counting an attempt (the deliverer is stopping)."""
    if event_ids:
        _end_lease(db, event_ids)


def _end_lease(db: Session, event_ids: Sequence[int], **changes: object) -> None:
    """Drop the lease of undelivered events, applying ``changes`` to them in one transaction."""
    with write_transaction(db):
        _end_lease_now(db, event_ids, **changes)


def _end_lease_now(db: Session, event_ids: Sequence[int], **changes: object) -> None:
    db.connection().execute(
        update(OutboxEvent)
        .where(col(OutboxEvent.id).in_(event_ids), col(OutboxEvent.delivered_at).is_(None))
        .values(leased_until=None, **changes)
    )
