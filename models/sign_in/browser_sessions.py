"""Browser sessions: how the review page knows who is looking, after they signed in once.

The cookie carries a random token; the database keeps only its hash, with the user and a CSRF
token every form of the session must send back. Replicas share the table, so a browser signed
in through one replica is signed in on all of them, and signing out (or an administrator making
the user inactive) ends the session everywhere at once.
"""

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import String
from sqlmodel import Field, Session, SQLModel, col, delete

from models.core import errors
from models.core.db import UTCDateTime, write_transaction
from models.users.schema import User
from models.users.service import require_active

BROWSER_SESSION_LIFETIME = timedelta(hours=12)


class BrowserSession(SQLModel, table=True):
    __tablename__ = "browser_session"

    token_hash: str = Field(sa_type=String(64), primary_key=True)
    user_id: uuid.UUID = Field(foreign_key="user.id", index=True, ondelete="CASCADE")
    csrf_token: str = Field(sa_type=String(64))
    created_at: datetime = Field(sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)


@dataclass(frozen=True)
class SignedInBrowser:
    user: User
    csrf_token: str


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def start_browser_session(*, db: Session, user_id: uuid.UUID, now: datetime) -> str:
    """A new session for ``user_id``; returns the cookie's token (stored only as a hash).

    Expired sessions are swept on the way: sign-ins are rare enough to carry that cost.
    """
    token = secrets.token_urlsafe(32)
    with write_transaction(db):
        db.exec(delete(BrowserSession).where(col(BrowserSession.expires_at) <= now))
        db.add(
            BrowserSession(
                token_hash=_token_hash(token),
                user_id=user_id,
                csrf_token=secrets.token_urlsafe(32),
                created_at=now,
                expires_at=now + BROWSER_SESSION_LIFETIME,
            )
        )
    return token


def browser_session_user(*, db: Session, token: str, now: datetime) -> SignedInBrowser | None:
    """Who the cookie's session belongs to; None if it is unknown or expired.

    An inactive user is refused (InactiveUser), as everywhere else.
    """
    if not token or len(token) > 256:
        return None
    found = db.get(BrowserSession, _token_hash(token))
    if found is None or found.expires_at <= now:
        return None
    user = db.get(User, found.user_id)
    if user is None:
        return None
    return SignedInBrowser(user=require_active(user), csrf_token=found.csrf_token)


def check_csrf(signed_in: SignedInBrowser, sent: str | None) -> None:
    """Refuse a form that does not carry the session's CSRF token (compared in constant time)."""
    if not sent or not hmac.compare_digest(sent.encode(), signed_in.csrf_token.encode()):
        raise errors.Forbidden("this form has expired or did not come from this site; reload it")


def end_browser_session(*, db: Session, token: str) -> None:
    with write_transaction(db):
        db.exec(delete(BrowserSession).where(col(BrowserSession.token_hash) == _token_hash(token)))
