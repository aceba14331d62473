"""The chat messages the bot posted, where cards go, and the two delivery lanes of chat.

Every message posted is remembered by a delivery key before its event is marked delivered, so a
retried event skips what an earlier attempt already posted: no card is posted twice and none is
lost. Cards (``review.created`` / ``review.updated``) and direct messages
(``chat.direct_message``) are leased in lanes of their own, so a requester's DMs waiting for
Slack's pace never hold back a card.
"""

import uuid
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from sqlalchemy import String
from sqlmodel import Field, Session, SQLModel, col, select

from models.core.db import UTCDateTime, enum_column, flush_or_conflict, new_id, write_transaction
from models.core.errors import Conflict
from models.delivery.outbox import EventKind
from models.plugins.schema import PluginName
from models.plugins.service import plugin_connection_config
from models.reviews.schema import Review
from models.sessions.schema import GatewaySession


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


CARD_KINDS = (EventKind.REVIEW_CREATED, EventKind.REVIEW_UPDATED)
DIRECT_MESSAGE_KINDS = (EventKind.DIRECT_MESSAGE,)


def posted_messages(
    *, db: Session, review_id: uuid.UUID, kind: ChatMessageKind | None = None
) -> list[ChatMessage]:
    """The messages posted for a review, oldest first."""
    statement = select(ChatMessage).where(ChatMessage.review_id == review_id)
    if kind is not None:
        statement = statement.where(ChatMessage.kind == kind)
    return list(db.exec(statement.order_by(col(ChatMessage.posted_at), col(ChatMessage.id))))


def delivered_keys(*, db: Session, keys: Sequence[str]) -> set[str]:
    """Which of these delivery keys already have a posted message."""
    if not keys:
        return set()
    found = db.exec(select(ChatMessage.delivery_key).where(col(ChatMessage.delivery_key).in_(keys)))
    return set(found)


def remember_message(
    *,
    db: Session,
    delivery_key: str,
    review_id: uuid.UUID,
    kind: ChatMessageKind,
    channel: str,
    ts: str,
    now: datetime,
) -> None:
    """Store where a posted message is, before anything else can forget it was posted."""
    try:
        with write_transaction(db):
            db.add(
                ChatMessage(
                    delivery_key=delivery_key,
                    review_id=review_id,
                    kind=kind,
                    channel=channel,
                    ts=ts,
                    posted_at=now,
                )
            )
            flush_or_conflict(db, "already posted")
    except Conflict:
        # Another deliverer posted it too after its lease ran out; the first one stays the card.
        return


def card_channels(*, db: Session, review_id: uuid.UUID, default_channel: str | None) -> list[str]:
    """The channels a review's card goes to: its connection's chat channels, then the default."""
    connection_id = db.exec(
        select(GatewaySession.connection_id)
        .join(Review, col(Review.session_id) == GatewaySession.id)
        .where(Review.id == review_id)
    ).first()
    channels = (
        []
        if connection_id is None
        else plugin_connection_config(
            db=db, plugin_name=PluginName.CHAT, connection_id=connection_id
        )
        or []
    )
    if default_channel and default_channel not in channels:
        channels.append(default_channel)
    return channels
