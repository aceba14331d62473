"""Linking a chat user (their Slack user id, ``chat_id``) to a gateway user.

The explicit flow: the chat user asks the bot for a one-time code (only they see it), then
proves who they are to the API by consuming it with their own token. Both sides have proved
something, so neither a chat user nor an API user can claim the other's identity alone. Only a
hash of the code is stored; a code lives ten minutes and works once.

The optional flow: an organization that trusts its chat workspace's verified e-mail addresses
may let a chat user be matched to the one active gateway user with that address.
"""

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import String, func
from sqlmodel import Field, Session, SQLModel, col, delete, select

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.core import errors
from models.core.clock import utc_now
from models.core.db import UTCDateTime, flush_or_conflict, write_transaction
from models.users.schema import User, UserPublic, UserStatus
from models.users.service import require_active, user_view

LINK_CODE_LIFETIME = timedelta(minutes=10)
# Unambiguous upper-case letters and digits: easy to read aloud and to type.
LINK_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
LINK_CODE_LENGTH = 10
MAX_CHAT_ID = 64


class ChatLinkCode(SQLModel, table=True):
    __tablename__ = "chat_link_code"

    code_hash: str = Field(sa_type=String(64), primary_key=True)
    chat_id: str = Field(max_length=MAX_CHAT_ID, index=True)
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


def _code_hash(code: str) -> str:
    normalized = code.strip().upper().replace("-", "").replace(" ", "")
    return hashlib.sha256(normalized.encode("utf-8", "surrogateescape")).hexdigest()


def start_chat_link(*, db: Session, chat_id: str, now: datetime) -> str:
    """A fresh one-time code for ``chat_id``; earlier codes of that chat user stop working."""
    if not chat_id or len(chat_id) > MAX_CHAT_ID:
        raise errors.InvalidRequest(f"chat user ids are 1 to {MAX_CHAT_ID} characters")
    code = "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(LINK_CODE_LENGTH))
    with write_transaction(db):
        db.exec(
            delete(ChatLinkCode).where(
                (col(ChatLinkCode.chat_id) == chat_id)
                | (col(ChatLinkCode.created_at) < now - LINK_CODE_LIFETIME)
            )
        )
        db.add(ChatLinkCode(code_hash=_code_hash(code), chat_id=chat_id, created_at=now))
    return code


def finish_chat_link(
    *, db: Session, actor: User, code: str, now: datetime, door: str = "api"
) -> UserPublic:
    """Use up ``code`` and link its chat user to ``actor``; commit. ``door``: api or page."""
    with write_transaction(db):
        link = db.get(ChatLinkCode, _code_hash(code), with_for_update=True)
        if link is None or link.created_at < now - LINK_CODE_LIFETIME:
            raise errors.UnknownCode(
                "this link code is unknown, used or expired; type /accessgate link for a new one"
            )
        db.delete(link)
        user = db.get_one(User, actor.id, with_for_update=True)
        user.chat_id = link.chat_id
        db.add(user)
        flush_or_conflict(
            db,
            "that chat account is linked to another user; an administrator can unlink it",
        )
        _audit_link(db, user, door, now, how="one-time code")
    return user_view(user)


def _audit_link(db: Session, user: User, door: str, now: datetime, *, how: str) -> None:
    record_audit(
        db,
        kind=AuditKind.CHAT_LINKED,
        actor=user,
        door=door,
        target=f"user:{user.sub}",
        now=now,
        details={"chat_id": user.chat_id, "how": how},
    )


def user_by_chat_id(*, db: Session, chat_id: str) -> User | None:
    """The gateway user linked to ``chat_id``, if any."""
    return db.exec(select(User).where(User.chat_id == chat_id)).first()


def linked_user(*, db: Session, chat_id: str) -> User:
    """The active gateway user a chat user acts as, or the reason they cannot act."""
    user = user_by_chat_id(db=db, chat_id=chat_id)
    if user is None:
        raise errors.ChatUserNotLinked("this chat account is not linked to a gateway user")
    return require_active(user)


def link_by_verified_email(*, db: Session, chat_id: str, email: str) -> User | None:
    """Link ``chat_id`` to the one active, unlinked user with ``email``; None if not exactly one.

    Only for organizations that opted in: the chat workspace must verify its users' addresses.
    """
    if not email:
        return None
    try:
        with write_transaction(db):
            candidates = list(
                db.exec(
                    select(User)
                    .where(
                        func.lower(User.email) == email.lower(),
                        User.status == UserStatus.ACTIVE,
                        col(User.chat_id).is_(None),
                    )
                    .limit(2)
                    .with_for_update()
                )
            )
            if len(candidates) != 1:
                return None
            user = candidates[0]
            user.chat_id = chat_id
            db.add(user)
            flush_or_conflict(db, "already linked")
            _audit_link(db, user, "slack", utc_now(), how="verified e-mail")
    except errors.Conflict:  # someone linked this chat user meanwhile
        return None
    return user
