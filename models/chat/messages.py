"""The chat messages the bot posted, where cards go, and the two delivery lanes of chat.

Every message has a delivery key (one card per review and channel, one DM per event). Before
posting, a deliverer claims the key (``claim_delivery``): one claim per key in the whole
cluster, so however often an event is leased again (its lease ran out while it waited for
Slack's pace, or another replica took it), the message is posted once. The posted message is
remembered under its key, and the claim dropped, in one transaction before the event is marked
delivered, so a retried event skips what an earlier attempt posted and none is lost. A claim
whose holder died mid-post is taken over after ``CLAIM_ABANDONED_AFTER``; one whose post ended
without an answer (a timeout, a lost connection, a 5xx: Slack may have posted it all the same)
is taken over at once. Either way the next holder looks for the message in the channel before
posting again (``Claim.RECHECK``), so a card that did land is adopted and rewritten, never left
behind with live buttons.

Cards (``review.created`` / ``review.updated``, and the scheduler's ``review.reminder`` /
``review.access_ended``) and direct messages (``chat.direct_message``, ``chat.reminder_digest``)
are leased in lanes of their own, so a requester's DMs waiting for Slack's pace never hold back
a card.
"""

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import String, delete, or_, update
from sqlmodel import Field, Session, SQLModel, col, select

from models.chat.channel_health import record_post
from models.core.db import (
    UTCDateTime,
    enum_column,
    flush_or_conflict,
    insert_unless_present,
    new_id,
    write_transaction,
)
from models.core.errors import Conflict
from models.delivery.leases import LeasedEvent, renew_lease_now
from models.delivery.outbox import EventKind
from models.plugins.schema import PluginName
from models.plugins.service import plugin_connection_config
from models.reviews.schema import Review
from models.sessions.schema import GatewaySession

logger = logging.getLogger("accessgate.chat")


class ChatMessageKind(StrEnum):
    CARD = "card"
    DIRECT = "direct"
    REMINDER = "reminder"  # a reply in a card's thread


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


def reminder_key(event_id: int, channel: str) -> str:
    """One reminder per reminder event and card."""
    return f"reminder:{event_id}:{channel}"


CARD_KINDS = (
    EventKind.REVIEW_CREATED,
    EventKind.REVIEW_UPDATED,
    EventKind.REVIEW_REMINDER,
    EventKind.REVIEW_ACCESS_ENDED,
)
DIRECT_MESSAGE_KINDS = (EventKind.DIRECT_MESSAGE, EventKind.REMINDER_DIGEST)


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


class ChatDeliveryClaim(SQLModel, table=True):
    """A message some deliverer is posting right now, or may have posted without knowing."""

    __tablename__ = "chat_delivery_claim"

    delivery_key: str = Field(sa_type=String(200), primary_key=True)
    claimed_at: datetime = Field(sa_type=UTCDateTime)
    # The last post's answer never came (timeout, lost connection, 5xx): the message may be in
    # the channel all the same. Whoever posts next looks there first (``Claim.RECHECK``).
    uncertain: bool = False


class Claim(StrEnum):
    CLAIMED = "claimed"  # post it now
    RECHECK = "recheck"  # an earlier post may have landed: look for it before posting
    POSTED = "posted"  # it is posted already: nothing to do
    BUSY = "busy"  # another deliverer is posting it: come back later
    LEASE_LOST = "lease_lost"  # the event is no longer this deliverer's: touch nothing


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    since: datetime | None = None  # RECHECK: when the post that may have landed was claimed


# By default; deliverers pass their lease period: a holder past its lease has lost its fence,
# and if it is mid-post after all, the next holder looks in the channel before posting.
CLAIM_ABANDONED_AFTER = timedelta(seconds=60)


def claim_delivery(
    *,
    db: Session,
    delivery_key: str,
    event: LeasedEvent,
    now: datetime,
    abandoned_after: timedelta = CLAIM_ABANDONED_AFTER,
) -> ClaimResult:
    """Claim the right to post the message of ``delivery_key``; at most one holder at a time.

    Only the deliverer still holding ``event``'s lease may claim (and the lease is renewed for
    ``abandoned_after``): one that lost it stops here, before its next call to Slack. A claim
    older than ``abandoned_after`` is taken over.
    """
    with write_transaction(db):
        if not renew_lease_now(db=db, event=event, now=now, lease=abandoned_after):
            return ClaimResult(Claim.LEASE_LOST)
        posted = db.exec(select(ChatMessage.id).where(ChatMessage.delivery_key == delivery_key))
        if posted.first() is not None:
            return ClaimResult(Claim.POSTED)
        claimed = insert_unless_present(
            db, ChatDeliveryClaim, key="delivery_key", delivery_key=delivery_key, claimed_at=now
        )
        if claimed:
            return ClaimResult(Claim.CLAIMED)
        # Taken over: the holder died mid-post, or its post ended without an answer. Either
        # way the message may exist already.
        earlier = (
            db.connection()
            .execute(
                select(ChatDeliveryClaim.claimed_at)
                .where(
                    col(ChatDeliveryClaim.delivery_key) == delivery_key,
                    or_(
                        col(ChatDeliveryClaim.uncertain),
                        col(ChatDeliveryClaim.claimed_at) < now - abandoned_after,
                    ),
                )
                .with_for_update()
            )
            .first()
        )
        if earlier is None:
            return ClaimResult(Claim.BUSY)
        db.connection().execute(
            update(ChatDeliveryClaim)
            .where(col(ChatDeliveryClaim.delivery_key) == delivery_key)
            .values(claimed_at=now, uncertain=False)
        )
        return ClaimResult(Claim.RECHECK, since=earlier.claimed_at)


def release_claim(*, db: Session, delivery_key: str, uncertain: bool = False) -> None:
    """The post failed. Slack refused it (let the next attempt claim it again), or, when
    ``uncertain``, its answer never came (the next attempt looks for the message first)."""
    with write_transaction(db):
        claim = col(ChatDeliveryClaim.delivery_key) == delivery_key
        if uncertain:
            db.connection().execute(update(ChatDeliveryClaim).where(claim).values(uncertain=True))
        else:
            db.connection().execute(delete(ChatDeliveryClaim).where(claim))


def remember_message(
    *,
    db: Session,
    delivery_key: str,
    review_id: uuid.UUID,
    kind: ChatMessageKind,
    channel: str,
    ts: str,
    now: datetime,
) -> bool:
    """Store where a posted message is, and drop its claim, before anything can forget it.

    False when another message is stored under the key already: the caller's is surplus. (The
    same message stored by a deliverer that found it in the channel is no surplus.)
    """
    try:
        with write_transaction(db):
            db.connection().execute(
                delete(ChatDeliveryClaim).where(col(ChatDeliveryClaim.delivery_key) == delivery_key)
            )
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
            if kind is ChatMessageKind.CARD:
                record_post(db=db, channel=channel, now=now)
    except Conflict:
        # Only a claim taken over from a deliverer that was alive after all can get here. If
        # the one who took it over found this very message in the channel, it is the card.
        stored = db.exec(
            select(ChatMessage.channel, ChatMessage.ts).where(
                ChatMessage.delivery_key == delivery_key
            )
        ).one()
        db.rollback()
        if tuple(stored) == (channel, ts):
            return True
        logger.warning("a second message was posted for %s; the first one stays", delivery_key)
        return False
    return True


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
