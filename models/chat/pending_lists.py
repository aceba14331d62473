"""The pending lists people are looking at: where to send a fresh one after a review changes.

``/accessgate pending`` answers through the command's ``response_url``; that URL stays usable
for thirty minutes and five answers (Slack's rules), so while it does, a decision from any door
can replace the list the reviewer sees. The URL lets its holder post to that person only, and
it is never logged.
"""

from datetime import datetime, timedelta

from sqlalchemy import String, update
from sqlmodel import Field, Session, SQLModel, col

from models.chat.links import MAX_CHAT_ID
from models.core.db import UTCDateTime, write_transaction

RESPONSE_URL_LIFETIME = timedelta(minutes=30)
RESPONSE_URL_USES = 5


class ChatPendingList(SQLModel, table=True):
    """The latest pending list shown to a chat user, and how much of its URL is used up."""

    __tablename__ = "chat_pending_list"

    chat_id: str = Field(primary_key=True, max_length=MAX_CHAT_ID)
    response_url: str = Field(sa_type=String(2000))
    shown_at: datetime = Field(sa_type=UTCDateTime)
    uses: int


def remember_pending_list(*, db: Session, chat_id: str, response_url: str, now: datetime) -> None:
    """A list was just shown through ``response_url`` (one use): it replaces any older one."""
    with write_transaction(db):
        shown = db.get(ChatPendingList, chat_id, with_for_update=True)
        if shown is None:
            shown = ChatPendingList(
                chat_id=chat_id, response_url=response_url, shown_at=now, uses=1
            )
        else:
            shown.response_url, shown.shown_at, shown.uses = response_url, now, 1
        db.add(shown)


def take_pending_list_url(*, db: Session, chat_id: str, now: datetime) -> str | None:
    """The URL of the list ``chat_id`` sees, counting one use; None when it can take no more."""
    with write_transaction(db):
        taken = (
            db.connection()
            .execute(
                update(ChatPendingList)
                .where(
                    col(ChatPendingList.chat_id) == chat_id,
                    col(ChatPendingList.uses) < RESPONSE_URL_USES,
                    col(ChatPendingList.shown_at) > now - RESPONSE_URL_LIFETIME,
                )
                .values(uses=col(ChatPendingList.uses) + 1)
                .returning(col(ChatPendingList.response_url))
            )
            .first()
        )
    return None if taken is None else str(taken[0])
