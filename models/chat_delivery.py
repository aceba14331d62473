"""What the chat notifier needs from the database: leases on outbox events, posted messages.

Delivery rules kept here, whatever transport does the talking:

- events of one review are delivered one after the other, oldest first, in each of two lanes:
  cards (``review.created`` / ``review.updated``) and direct messages (``chat.direct_message``).
  An event is offered only when no older event of its review and lane is still undelivered, so
  a requester's DMs waiting for Slack's pace never hold back a card;
- an event is leased to one deliverer at a time (``leased_until``), so several processes can
  share the outbox without delivering an event twice while it is being worked on;
- every message posted is remembered by a delivery key before the event is marked delivered,
  so a retried event skips what an earlier attempt already posted: no card is posted twice
  and none is lost.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import String, exists, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Field, Session, SQLModel, col, select

from models.db import UTCDateTime, enum_column, flush_or_conflict, new_id, write_transaction
from models.errors import Conflict
from models.outbox import EventKind, OutboxEvent, record_event
from models.plugin_service import plugin_connection_config
from models.plugins import PluginName
from models.reviews import Review
from models.sessions import GatewaySession

LEASE = timedelta(seconds=60)
MAX_ERROR_LENGTH = 1000


class ChatMessageKind(StrEnum):
    CARD = "card"
    DIRECT = "direct"


class ChatMessage(SQLModel, table=True):
    """A message the bot posted: where it is (channel, ts) and why (delivery key)."""

    __tablename__ = "chat_message"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    delivery_key: str = Field(sa_type=String(200), unique=True)
    review_id: uuid.UUID = Field(foreign_key="review.id", index=True, ondelete="CASCADE")
    kind: ChatMessageKind = Field(sa_type=enum_column(ChatMessageKind))
    channel: str = Field(max_length=64)
    ts: str = Field(max_length=64)
    posted_at: datetime = Field(sa_type=UTCDateTime)


def card_key(review_id: uuid.UUID, channel: str) -> str:
    """One card per review and channel."""
    return f"card:{review_id}:{channel}"


def direct_message_key(event_id: int) -> str:
    """One direct message per event that warrants one."""
    return f"direct:{event_id}"


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
CARD_KINDS = (EventKind.REVIEW_CREATED, EventKind.REVIEW_UPDATED)
DIRECT_MESSAGE_KINDS = (EventKind.DIRECT_MESSAGE,)


def lease_deliverable_events(
    *, session: Session, now: datetime, limit: int, kinds: Sequence[EventKind]
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
    candidates = [event_id for event_id in session.exec(due) if event_id is not None]
    if not candidates:
        session.rollback()  # end the read transaction: SQLite readers pin the WAL
        return []
    with write_transaction(session):
        # Leases are taken only where nobody took one since the read: each row has one winner
        # (PostgreSQL re-checks the condition on rows another transaction just leased).
        taken = (
            session.connection()
            .execute(
                update(OutboxEvent)
                .where(
                    col(OutboxEvent.id).in_(candidates),
                    col(OutboxEvent.delivered_at).is_(None),
                    lease_is_free,
                )
                .values(leased_until=now + LEASE)
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
    session: Session,
    event_id: int,
    now: datetime,
    note: str | None = None,
    direct_message: tuple[uuid.UUID, str] | None = None,
) -> None:
    """The event is done (``note`` says what could not be delivered and will not be retried).

    ``direct_message`` (review id, status entered) queues the requester's DM in the same
    transaction, so it is neither lost nor queued twice.
    """
    with write_transaction(session):
        _end_lease_now(
            session,
            [event_id],
            delivered_at=now,
            last_error=None if note is None else note[:MAX_ERROR_LENGTH],
        )
        if direct_message is not None:
            review_id, status = direct_message
            record_event(
                session,
                kind=EventKind.DIRECT_MESSAGE,
                review_id=review_id,
                payload={"review_id": str(review_id), "status": status},
                now=now,
            )


def reschedule(*, session: Session, event_id: int, at: datetime) -> None:
    """Deliver the event at ``at``, its turn in Slack's pace; not a failed attempt."""
    _end_lease(session, [event_id], next_attempt_at=at)


def postpone(
    *, session: Session, event_id: int, now: datetime, delay: timedelta, error: str
) -> None:
    """Delivery failed for now: count the attempt and try again after ``delay``."""
    _end_lease(
        session,
        [event_id],
        attempts=OutboxEvent.attempts + 1,
        last_error=error[:MAX_ERROR_LENGTH],
        next_attempt_at=now + delay,
    )


def release_leases(*, session: Session, event_ids: Sequence[int]) -> None:
    """Give events back without counting an attempt (the deliverer is stopping)."""
    if event_ids:
        _end_lease(session, event_ids)


def _end_lease(session: Session, event_ids: Sequence[int], **changes: object) -> None:
    """Drop the lease of undelivered events, applying ``changes`` to them in one transaction."""
    with write_transaction(session):
        _end_lease_now(session, event_ids, **changes)


def _end_lease_now(session: Session, event_ids: Sequence[int], **changes: object) -> None:
    session.connection().execute(
        update(OutboxEvent)
        .where(col(OutboxEvent.id).in_(event_ids), col(OutboxEvent.delivered_at).is_(None))
        .values(leased_until=None, **changes)
    )


def posted_messages(
    *, session: Session, review_id: uuid.UUID, kind: ChatMessageKind | None = None
) -> list[ChatMessage]:
    """The messages posted for a review, oldest first."""
    statement = select(ChatMessage).where(ChatMessage.review_id == review_id)
    if kind is not None:
        statement = statement.where(ChatMessage.kind == kind)
    return list(session.exec(statement.order_by(col(ChatMessage.posted_at), col(ChatMessage.id))))


def delivered_keys(*, session: Session, keys: Sequence[str]) -> set[str]:
    """Which of these delivery keys already have a posted message."""
    if not keys:
        return set()
    found = session.exec(
        select(ChatMessage.delivery_key).where(col(ChatMessage.delivery_key).in_(keys))
    )
    return set(found)


def remember_message(
    *,
    session: Session,
    delivery_key: str,
    review_id: uuid.UUID,
    kind: ChatMessageKind,
    channel: str,
    ts: str,
    now: datetime,
) -> None:
    """Store where a posted message is, before anything else can forget it was posted."""
    try:
        with write_transaction(session):
            session.add(
                ChatMessage(
                    delivery_key=delivery_key,
                    review_id=review_id,
                    kind=kind,
                    channel=channel,
                    ts=ts,
                    posted_at=now,
                )
            )
            flush_or_conflict(session, "already posted")
    except Conflict:
        # Another deliverer posted it too after its lease ran out; the first one stays the card.
        return


def card_channels(
    *, session: Session, review_id: uuid.UUID, default_channel: str | None
) -> list[str]:
    """The channels a review's card goes to: its connection's chat channels, then the default."""
    connection_id = session.exec(
        select(GatewaySession.connection_id)
        .join(Review, col(Review.session_id) == GatewaySession.id)
        .where(Review.id == review_id)
    ).first()
    channels = (
        []
        if connection_id is None
        else plugin_connection_config(
            session=session, plugin_name=PluginName.CHAT, connection_id=connection_id
        )
        or []
    )
    if default_channel and default_channel not in channels:
        channels.append(default_channel)
    return channels
