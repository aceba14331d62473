"""Leases on outbox events: which deliverer works on which event, and until when.

Rules kept here, whatever consumer does the delivering:

- events of one review are delivered one after the other, oldest first, within each lane (a
  lane is a set of event kinds): an event is offered only when no older event of its review and
  lane is still undelivered, so one lane waiting (for a chat service's pace, say) never holds
  back another;
- an event is leased to one deliverer at a time (``leased_until``), so several processes can
  share the outbox without delivering an event twice while it is being worked on;
- every lease has a fencing token: a deliverer that kept an event past its lease, while another
  took it, finds its token gone and can no longer mark, postpone or give the event back
  (``renew_lease`` lets it check, and hold on, before acting outside the database).
"""

import secrets
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, exists, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from models.core.db import write_transaction
from models.delivery.outbox import EventKind, OutboxEvent, record_event

MAX_ERROR_LENGTH = 1000
# What a requester's direct message tells them.
DECISION = "decision"
ACCESS_ENDED = "access_ended"


@dataclass(frozen=True)
class LeasedEvent:
    id: int
    kind: str
    review_id: uuid.UUID
    payload: dict[str, object]
    created_at: datetime
    attempts: int
    lease_token: str


LEASED_COLUMNS = [
    OutboxEvent.__table__.c[name]  # type: ignore[attr-defined]
    for name in (
        "id",
        "kind",
        "review_id",
        "payload",
        "created_at",
        "attempts",
        "lease_token",
    )
]


def _lease_is_free(now: datetime) -> ColumnElement[bool]:
    return or_(col(OutboxEvent.leased_until).is_(None), col(OutboxEvent.leased_until) <= now)


def deliverable_events_query(
    *, now: datetime, limit: int, kinds: Sequence[EventKind]
) -> SelectOfScalar[int] | SelectOfScalar[None]:
    """The ids of up to ``limit`` due events of one lane, the oldest undelivered of each review.

    Every condition starts from ``delivered_at IS NULL``, which the partial indexes on
    undelivered events match: the query costs what the backlog holds, not the whole table.
    """
    older = aliased(OutboxEvent)
    older_pending = exists().where(
        col(older.review_id) == col(OutboxEvent.review_id),
        col(older.delivered_at).is_(None),
        col(older.id) < col(OutboxEvent.id),
        col(older.kind).in_(kinds),
    )
    lease_is_free = _lease_is_free(now)
    return (
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


def lease_deliverable_events(
    *,
    db: Session,
    now: datetime,
    limit: int,
    kinds: Sequence[EventKind],
    lease: timedelta,
    working_on: Collection[int] = (),
) -> list[LeasedEvent]:
    """Lease up to ``limit`` due events of one lane (``kinds``), the oldest of each review.

    Events in ``working_on`` (this deliverer's, whose lease ran out while they waited for
    their turn) are left to it: a new lease would change their token under its feet.
    """
    due = deliverable_events_query(now=now, limit=limit, kinds=kinds)
    if working_on:
        due = due.where(col(OutboxEvent.id).not_in(working_on))
    lease_is_free = _lease_is_free(now)
    take = update(OutboxEvent).values(leased_until=now + lease, lease_token=secrets.token_hex(16))
    if db.get_bind().dialect.name == "postgresql":
        # One statement: the due rows are locked as they are chosen, and rows another
        # deliverer is leasing this instant are skipped rather than waited for.
        chosen = due.with_for_update(skip_locked=True, of=OutboxEvent).scalar_subquery()
        with write_transaction(db):
            taken = (
                db.connection()
                .execute(take.where(col(OutboxEvent.id).in_(chosen)).returning(*LEASED_COLUMNS))
                .all()
            )
    else:
        # SQLite: look first, without the write lock (nothing due is the common case), then
        # take only what nobody took since the look.
        candidates = [event_id for event_id in db.exec(due) if event_id is not None]
        if not candidates:
            db.rollback()  # end the read transaction: SQLite readers pin the WAL
            return []
        with write_transaction(db):
            still_free = take.where(
                col(OutboxEvent.id).in_(candidates),
                col(OutboxEvent.delivered_at).is_(None),
                lease_is_free,
            )
            taken = db.connection().execute(still_free.returning(*LEASED_COLUMNS)).all()
    leased = [
        LeasedEvent(
            id=row.id,
            kind=EventKind(row.kind).value,
            review_id=row.review_id,
            payload=dict(row.payload),
            created_at=row.created_at,
            attempts=row.attempts,
            lease_token=row.lease_token,
        )
        for row in taken
    ]
    return sorted(leased, key=lambda event: event.id)


def renew_lease_now(*, db: Session, event: LeasedEvent, now: datetime, lease: timedelta) -> bool:
    """Extend ``event``'s lease by ``lease`` from now, inside the caller's (writing)
    transaction, if it is still this deliverer's: False when another deliverer took it over
    (its token replaced this one's) or it ended."""
    renewed = db.connection().execute(
        update(OutboxEvent)
        .where(
            col(OutboxEvent.id) == event.id,
            col(OutboxEvent.lease_token) == event.lease_token,
            col(OutboxEvent.delivered_at).is_(None),
        )
        .values(leased_until=now + lease)
        .returning(col(OutboxEvent.id))
    )
    return renewed.first() is not None


def renew_lease(*, db: Session, event: LeasedEvent, now: datetime, lease: timedelta) -> bool:
    """``renew_lease_now`` in a transaction of its own (before a call to another service)."""
    with write_transaction(db):
        return renew_lease_now(db=db, event=event, now=now, lease=lease)


def mark_delivered(
    *,
    db: Session,
    event: LeasedEvent,
    now: datetime,
    note: str | None = None,
    direct_message: tuple[uuid.UUID, str] | None = None,
    about: str = DECISION,
) -> None:
    """The event is done (``note`` says what could not be delivered and will not be retried).

    ``direct_message`` (review id, status entered) queues the requester's DM in the same
    transaction, so it is neither lost nor queued twice; ``about`` says what it tells (a
    decision, or the end of the access granted).
    """
    with write_transaction(db):
        ended = _end_lease_now(
            db,
            [event],
            delivered_at=now,
            last_error=None if note is None else note[:MAX_ERROR_LENGTH],
        )
        if ended and direct_message is not None:
            review_id, status = direct_message
            record_event(
                db,
                kind=EventKind.DIRECT_MESSAGE,
                review_id=review_id,
                payload={"review_id": str(review_id), "status": status, "about": about},
                now=now,
            )


def reschedule(*, db: Session, event: LeasedEvent, at: datetime) -> None:
    """Deliver the event at ``at``, its turn in Slack's pace; not a failed attempt."""
    _end_lease(db, [event], next_attempt_at=at)


def postpone(
    *, db: Session, event: LeasedEvent, now: datetime, delay: timedelta, error: str
) -> None:
    """Delivery failed for now: count the attempt and try again after ``delay``."""
    _end_lease(
        db,
        [event],
        attempts=OutboxEvent.attempts + 1,
        last_error=error[:MAX_ERROR_LENGTH],
        next_attempt_at=now + delay,
    )


def release_leases(*, db: Session, events: Sequence[LeasedEvent]) -> None:
    """Give events back without counting an attempt (the deliverer is stopping)."""
    if events:
        _end_lease(db, events)


def _end_lease(db: Session, events: Sequence[LeasedEvent], **changes: object) -> None:
    """Drop the lease of undelivered events, applying ``changes`` to them in one transaction."""
    with write_transaction(db):
        _end_lease_now(db, events, **changes)


def _end_lease_now(db: Session, events: Sequence[LeasedEvent], **changes: object) -> bool:
    """End the leases still held by these events' tokens; False when none was."""
    ended = False
    for token, ids in _ids_by_token(events).items():
        result = db.connection().execute(
            update(OutboxEvent)
            .where(
                col(OutboxEvent.id).in_(ids),
                col(OutboxEvent.lease_token) == token,
                col(OutboxEvent.delivered_at).is_(None),
            )
            .values(leased_until=None, lease_token=None, **changes)
            .returning(col(OutboxEvent.id))
        )
        ended = bool(result.all()) or ended
    return ended


def _ids_by_token(events: Sequence[LeasedEvent]) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {}
    for event in events:
        ids.setdefault(event.lease_token, []).append(event.id)
    return ids
