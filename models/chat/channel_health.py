"""How posting to each chat channel goes, for the bot's status: a channel the bot was removed
from answers every post with an error while the connection itself is fine.

A channel is failing while its last error is newer than its last successful post.
"""

from datetime import datetime
from enum import StrEnum

import pydantic
from sqlalchemy import String
from sqlmodel import Field, Session, SQLModel, col, select

from models.core.db import UTCDateTime, upsert, write_transaction

MAX_ERROR_LENGTH = 200


class ChatChannelHealth(SQLModel, table=True):
    __tablename__ = "chat_channel_health"

    channel: str = Field(sa_type=String(64), primary_key=True)
    last_posted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_error: str | None = Field(default=None, sa_type=String(MAX_ERROR_LENGTH))
    last_error_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ChannelState(StrEnum):
    OK = "ok"
    FAILING = "failing"


class ChannelHealth(pydantic.BaseModel):
    channel: str
    state: ChannelState = pydantic.Field(
        description="failing: the last post to the channel failed for good (the bot was "
        "removed, the channel archived, ...); ok: the last post went through."
    )
    last_posted_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None


def record_post(*, db: Session, channel: str, now: datetime) -> None:
    """A message reached ``channel`` (inside the caller's transaction)."""
    upsert(db, ChatChannelHealth, key="channel", channel=channel, last_posted_at=now)


def record_failure(*, db: Session, channel: str, error: str, now: datetime) -> None:
    """Slack will not take messages for ``channel``. Commit."""
    with write_transaction(db):
        upsert(
            db,
            ChatChannelHealth,
            key="channel",
            channel=channel,
            last_error=error[:MAX_ERROR_LENGTH],
            last_error_at=now,
        )


def channel_health(db: Session) -> list[ChannelHealth]:
    """Every channel the bot posted to or tried to, failing ones first."""
    rows = db.exec(select(ChatChannelHealth).order_by(col(ChatChannelHealth.channel))).all()
    views = [
        ChannelHealth(
            channel=row.channel,
            state=ChannelState.FAILING if _failing(row) else ChannelState.OK,
            last_posted_at=row.last_posted_at,
            last_error=row.last_error,
            last_error_at=row.last_error_at,
        )
        for row in rows
    ]
    return sorted(views, key=lambda view: view.state is ChannelState.OK)


def _failing(row: ChatChannelHealth) -> bool:
    if row.last_error_at is None:
        return False
    return row.last_posted_at is None or row.last_error_at > row.last_posted_at
