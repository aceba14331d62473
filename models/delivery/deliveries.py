"""Deliveries as an admin sees them: which events failed for good and why, which are still being
retried, and a way to try a failed one again.

An event that failed for good is delivered (``delivered_at`` set) with ``last_error`` saying
what could not be delivered. Retrying it queues a copy as a new event, so the failed one stays
as it was (what happened, and when) and the copy is not refused as a day old.
"""

import uuid
from datetime import datetime
from enum import StrEnum

import pydantic
from sqlalchemy import ColumnElement, and_
from sqlmodel import Session, col, select

from models.core import errors
from models.core.db import write_transaction
from models.delivery.outbox import EventKind, OutboxEvent, record_event

MAX_PAGE = 200


class DeliveryStatus(StrEnum):
    FAILED = "failed"  # ended without being delivered; will not be retried unless asked
    RETRYING = "retrying"  # failed for now; tried again with backoff
    PENDING = "pending"  # not delivered yet (retrying ones included)
    DELIVERED = "delivered"
    RETRIED = "retried"  # failed, then queued again as another delivery (``retried_as``)


class DeliveryPublic(pydantic.BaseModel):
    id: int
    kind: str
    review_id: uuid.UUID | None
    status: DeliveryStatus
    attempts: int
    error: str | None = pydantic.Field(description="Why it failed, last time it did.")
    created_at: datetime
    finished_at: datetime | None
    next_attempt_at: datetime | None
    retried_as: int | None = pydantic.Field(description="The delivery queued when it was retried.")


class DeliveryPage(pydantic.BaseModel):
    items: list[DeliveryPublic]
    next_cursor: str | None = pydantic.Field(description="Pass as cursor for the next page.")


def _status_filter(status: DeliveryStatus) -> ColumnElement[bool]:
    delivered = col(OutboxEvent.delivered_at).is_not(None)
    failed = col(OutboxEvent.last_error).is_not(None)
    retried = col(OutboxEvent.retried_as).is_not(None)
    return {
        DeliveryStatus.FAILED: and_(delivered, failed, ~retried),
        DeliveryStatus.RETRIED: retried,
        DeliveryStatus.RETRYING: and_(~delivered, failed),
        DeliveryStatus.PENDING: ~delivered,
        DeliveryStatus.DELIVERED: and_(delivered, ~failed),
    }[status]


def _status_of(event: OutboxEvent) -> DeliveryStatus:
    if event.delivered_at is None:
        return DeliveryStatus.PENDING if event.last_error is None else DeliveryStatus.RETRYING
    if event.retried_as is not None:
        return DeliveryStatus.RETRIED
    return DeliveryStatus.DELIVERED if event.last_error is None else DeliveryStatus.FAILED


def _view(event: OutboxEvent) -> DeliveryPublic:
    assert event.id is not None
    return DeliveryPublic(
        id=event.id,
        kind=event.kind.value,
        review_id=event.review_id,
        status=_status_of(event),
        attempts=event.attempts,
        error=event.last_error,
        created_at=event.created_at,
        finished_at=event.delivered_at,
        next_attempt_at=event.next_attempt_at,
        retried_as=event.retried_as,
    )


def list_deliveries(
    *,
    db: Session,
    kinds: tuple[EventKind, ...],
    status: DeliveryStatus,
    limit: int,
    cursor: str | None,
) -> DeliveryPage:
    """Deliveries of ``kinds`` in ``status``, newest first, a page at a time."""
    statement = select(OutboxEvent).where(col(OutboxEvent.kind).in_(kinds), _status_filter(status))
    if cursor is not None:
        if not cursor.isdigit():
            raise errors.InvalidRequest("cursor: not one this list gave out")
        statement = statement.where(col(OutboxEvent.id) < int(cursor))
    limit = min(limit, MAX_PAGE)
    rows = list(db.exec(statement.order_by(col(OutboxEvent.id).desc()).limit(limit + 1)))
    more = len(rows) > limit
    items = [_view(row) for row in rows[:limit]]
    return DeliveryPage(items=items, next_cursor=str(items[-1].id) if more else None)


def retry_delivery(
    *, db: Session, kinds: tuple[EventKind, ...], delivery_id: int, now: datetime
) -> DeliveryPublic:
    """Queue a failed delivery again, as a new event; the failed one records that it was."""
    with write_transaction(db):
        failed = db.exec(
            select(OutboxEvent)
            .where(OutboxEvent.id == delivery_id, col(OutboxEvent.kind).in_(kinds))
            .with_for_update()
        ).first()
        if failed is None:
            raise errors.NotFound("no such delivery")
        status = _status_of(failed)
        if status is not DeliveryStatus.FAILED or failed.review_id is None:
            raise errors.Conflict(f"only a failed delivery can be retried; this one is {status}")
        retry = record_event(
            db, kind=failed.kind, review_id=failed.review_id, payload=failed.payload, now=now
        )
        db.flush()
        failed.retried_as = retry.id
        db.add(failed)
    return _view(retry)
