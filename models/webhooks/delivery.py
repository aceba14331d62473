"""Delivering webhook events: fan-out to endpoints, leases, and the outcome of each attempt.

- **Fan-out.** Events not fanned out yet are claimed a batch at a time (``FOR UPDATE SKIP
  LOCKED`` on PostgreSQL), one delivery row is written for each enabled endpoint that wants the
  kind, with the exact body that will be signed and sent, and the event is marked fanned out:
  one transaction, so an event is fanned out once.
- **In order per review, per endpoint.** A delivery is offered only when no older delivery of
  the same review to the same endpoint is still pending; one endpoint waiting never holds back
  another.
- **Leases with fencing.** A leased delivery carries a token; only the holder of the current
  token may record its outcome, so a deliverer whose lease ran out (and was taken over) cannot
  overwrite what the new holder did.
- **Retries.** A failed attempt waits for the next step of the schedule (about a day in all by
  default); after the last, the delivery is ``failed`` until an admin retries it.
"""

import json
import secrets
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, insert, or_, update
from sqlalchemy import select as core_select
from sqlmodel import Session

from models.core.db import finds_any, table_of, write_transaction
from models.plugins.schema import Plugin, PluginName
from models.webhooks.schema import (
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

FAN_OUT_BATCH = 200
MAX_ERROR = 1000

_events = table_of(WebhookEvent)
_endpoints = table_of(WebhookEndpoint)
_deliveries = table_of(WebhookDelivery)
_INSERT_DELIVERY = insert(_deliveries)


def body_of(kind: str, created_at: datetime, data: dict[str, Any]) -> str:
    """The JSON body every attempt of a delivery sends (and signs) as it is."""
    return json.dumps(
        {"type": kind, "timestamp": created_at.isoformat().replace("+00:00", "Z"), "data": data},
        separators=(",", ":"),
    )


def fan_out(db: Session, *, now: datetime, organizations: Collection[uuid.UUID]) -> int:
    """Write the deliveries of a batch of events of ``organizations`` (those with the webhooks
    plugin installed); return how many events were fanned out. Others wait, not lost."""
    statement = (
        core_select(_events)
        .where(
            _events.c.fanned_out.is_(False),
            _events.c.organization_id.in_(list(organizations)),
        )
        .order_by(_events.c.id)
        .limit(FAN_OUT_BATCH)
    )
    if not finds_any(db, statement):
        return 0
    with write_transaction(db):
        if db.get_bind().dialect.name == "postgresql":
            statement = statement.with_for_update(skip_locked=True)
        events = db.execute(statement).mappings().all()
        if not events:
            return 0
        organizations = {event["organization_id"] for event in events}
        endpoints = db.execute(
            core_select(
                _endpoints.c.id,
                _endpoints.c.organization_id,
                _endpoints.c.events,
                _endpoints.c.created_at,
            ).where(_endpoints.c.organization_id.in_(organizations), _endpoints.c.enabled.is_(True))
        ).all()
        rows = [
            {
                "endpoint_id": endpoint.id,
                "event_id": event["id"],
                "message_id": f"msg_{event['id']}",
                "kind": event["kind"],
                "review_id": event["review_id"],
                "body": body_of(event["kind"], event["created_at"], event["data"]),
                "event_at": event["created_at"],
                "status": DeliveryStatus.PENDING.value,
                "attempts": 0,
                "next_attempt_at": now,
            }
            for event in events
            for endpoint in endpoints
            if endpoint.organization_id == event["organization_id"]
            # An endpoint gets what happened since it was registered, not the history before.
            and event["created_at"] >= endpoint.created_at
            and (not endpoint.events or event["kind"] in endpoint.events)
        ]
        if rows:
            db.execute(_INSERT_DELIVERY, rows)
        db.execute(
            update(_events)
            .where(_events.c.id.in_([event["id"] for event in events]))
            .values(fanned_out=True)
        )
    return len(events)


@dataclass(frozen=True)
class LeasedDelivery:
    id: int
    endpoint_id: uuid.UUID
    url: str
    sealed_secret: str
    message_id: str
    body: str
    attempts: int
    lease_token: str


def lease_due(
    db: Session,
    *,
    now: datetime,
    limit: int,
    lease: timedelta,
    organizations: Collection[uuid.UUID],
    busy_endpoints: Collection[uuid.UUID] = (),
) -> list[LeasedDelivery]:
    """Lease up to ``limit`` due deliveries, each the oldest pending of its review and
    endpoint, leaving out endpoints that have as many in flight as they may."""
    older = _deliveries.alias("older")
    older_pending = exists().where(
        older.c.endpoint_id == _deliveries.c.endpoint_id,
        older.c.review_id == _deliveries.c.review_id,
        older.c.status == DeliveryStatus.PENDING.value,
        older.c.id < _deliveries.c.id,
    )
    lease_free = or_(_deliveries.c.leased_until.is_(None), _deliveries.c.leased_until <= now)
    due = (
        core_select(_deliveries.c.id)
        .select_from(_deliveries.join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id))
        .where(
            _deliveries.c.status == DeliveryStatus.PENDING.value,
            _deliveries.c.next_attempt_at <= now,
            lease_free,
            _endpoints.c.enabled.is_(True),
            _endpoints.c.organization_id.in_(list(organizations)),
            or_(_deliveries.c.review_id.is_(None), ~older_pending),
        )
        .order_by(_deliveries.c.next_attempt_at, _deliveries.c.id)
        .limit(limit)
    )
    if busy_endpoints:
        due = due.where(_deliveries.c.endpoint_id.not_in(list(busy_endpoints)))
    if not finds_any(db, due):
        return []
    token = secrets.token_hex(16)
    with write_transaction(db):
        if db.get_bind().dialect.name == "postgresql":
            due = due.with_for_update(skip_locked=True, of=_deliveries)
        ids = list(db.execute(due).scalars())
        if not ids:
            return []
        db.execute(
            update(_deliveries)
            .where(_deliveries.c.id.in_(ids), lease_free)
            .values(leased_until=now + lease, lease_token=token)
        )
        rows = db.execute(
            core_select(
                _deliveries.c.id,
                _deliveries.c.endpoint_id,
                _endpoints.c.url,
                _endpoints.c.sealed_secret,
                _deliveries.c.message_id,
                _deliveries.c.body,
                _deliveries.c.attempts,
            )
            .select_from(_deliveries.join(_endpoints, _endpoints.c.id == _deliveries.c.endpoint_id))
            .where(_deliveries.c.id.in_(ids), _deliveries.c.lease_token == token)
            .order_by(_deliveries.c.id)
        ).all()
    return [
        LeasedDelivery(
            id=row.id,
            endpoint_id=row.endpoint_id,
            url=row.url,
            sealed_secret=row.sealed_secret,
            message_id=row.message_id,
            body=row.body,
            attempts=row.attempts,
            lease_token=token,
        )
        for row in rows
    ]


@dataclass(frozen=True)
class Attempt:
    """How one send went: the HTTP status, or the error when there was no answer."""

    delivery: LeasedDelivery
    status_code: int | None
    error: str | None


def record_outcomes(
    db: Session, *, attempts: Sequence[Attempt], now: datetime, schedule: Sequence[timedelta]
) -> list[str | None]:
    """Record attempts in one transaction (one writer at a time on SQLite: a transaction per
    attempt would queue the decisions behind the webhooks). The new status of each, or None
    where the lease was lost (nothing recorded)."""
    with write_transaction(db):
        return [
            _record(db, attempt.delivery, now, attempt.status_code, attempt.error, schedule)
            for attempt in attempts
        ]


def _record(
    db: Session,
    delivery: LeasedDelivery,
    now: datetime,
    status_code: int | None,
    error: str | None,
    schedule: Sequence[timedelta],
) -> str | None:
    """Delivered on a 2xx, else the next attempt, or ``failed`` after the last; fenced by the
    lease token."""
    ok = status_code is not None and 200 <= status_code < 300
    attempts = delivery.attempts + 1
    values: dict[str, Any] = {
        "attempts": attempts,
        "last_status_code": status_code,
        "last_error": None if ok else (error or f"answered {status_code}")[:MAX_ERROR],
        "leased_until": None,
        "lease_token": None,
    }
    if ok:
        values |= {"status": DeliveryStatus.DELIVERED.value, "delivered_at": now}
    elif attempts > len(schedule):
        values |= {"status": DeliveryStatus.FAILED.value}
    else:
        values |= {"next_attempt_at": now + schedule[attempts - 1]}
    changed = (
        db.connection()
        .execute(
            update(_deliveries)
            .where(
                and_(
                    _deliveries.c.id == delivery.id,
                    _deliveries.c.lease_token == delivery.lease_token,
                )
            )
            .values(values)
        )
        .rowcount
    )
    if not changed:
        return None
    return str(values.get("status", DeliveryStatus.PENDING.value))


def release(db: Session, deliveries: Sequence[LeasedDelivery]) -> None:
    """Give leases back (a deliverer stopping): the next deliverer takes them at once."""
    with write_transaction(db):
        for delivery in deliveries:
            db.execute(
                update(_deliveries)
                .where(
                    _deliveries.c.id == delivery.id,
                    _deliveries.c.lease_token == delivery.lease_token,
                )
                .values(leased_until=None, lease_token=None)
            )


def organizations_with_webhooks(db: Session) -> list[uuid.UUID]:
    """The organizations that have the webhooks plugin installed: delivery runs for them."""
    plugins = table_of(Plugin)
    found = db.execute(
        core_select(plugins.c.organization_id).where(plugins.c.name == PluginName.WEBHOOKS)
    )
    return list(found.scalars())
