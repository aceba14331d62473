"""Sign-in attempts: remembered between the login URL and the callback, used once.

The state, nonce and PKCE verifier stay on the server (only a hash of the state is stored), so
a code intercepted on its way back is useless without the attempt it belongs to.
"""

import hashlib
import ipaddress
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from sqlalchemy import String
from sqlmodel import Field, Session, SQLModel, col, delete, select

from models.core import errors
from models.core.db import UTCDateTime, write_transaction
from models.sign_in.oidc import OidcClient
from models.users.schema import UserPublic
from models.users.service import authenticated_user, upsert_user, user_view

ATTEMPT_LIFETIME = timedelta(minutes=10)


class SignInAttempt(SQLModel, table=True):
    __tablename__ = "sign_in_attempt"

    state_hash: str = Field(sa_type=String(64), primary_key=True)
    nonce: str = Field(sa_type=String(128))
    code_verifier: str = Field(sa_type=String(128))
    return_to: str | None = Field(default=None, sa_type=String(2048))
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8", "surrogateescape")).hexdigest()


def check_return_to(url: str) -> str:
    """A command-line client's own loopback address; anything else could steal the token."""
    parts = urlsplit(url)
    try:
        loopback = ipaddress.ip_address(parts.hostname or "").is_loopback
    except ValueError:
        loopback = parts.hostname == "localhost"
    if parts.scheme != "http" or not loopback or parts.username or parts.password:
        raise errors.InvalidRequest("redirect must be an http://127.0.0.1:<port>/... address")
    return url


def start_sign_in(*, db: Session, client: OidcClient, return_to: str | None, now: datetime) -> str:
    """Remember a new attempt and return the URL that leads to the identity provider."""
    if return_to is not None:
        check_return_to(return_to)
    login = client.start_login()
    with write_transaction(db):
        db.exec(delete(SignInAttempt).where(col(SignInAttempt.created_at) < now - ATTEMPT_LIFETIME))
        db.add(
            SignInAttempt(
                state_hash=_state_hash(login.state),
                nonce=login.nonce,
                code_verifier=login.code_verifier,
                return_to=return_to,
                created_at=now,
            )
        )
    return login.url


def finish_sign_in(
    *, db: Session, client: OidcClient, code: str, state: str, now: datetime
) -> tuple[UserPublic, str, str | None]:
    """Use up the attempt, check the provider's answer, sign the user up or refresh them.

    Returns the user, the access token for API calls, and where the attempt asked to go back.
    """
    with write_transaction(db):
        attempt = db.exec(
            select(SignInAttempt).where(SignInAttempt.state_hash == _state_hash(state))
        ).first()
        if attempt is not None:
            db.delete(attempt)
    if attempt is None or attempt.created_at < now - ATTEMPT_LIFETIME:
        raise errors.Unauthenticated("this sign-in is unknown or expired; start it again")
    identity, access_token = client.finish_login(
        code=code, code_verifier=attempt.code_verifier, nonce=attempt.nonce
    )
    upsert_user(
        db=db,
        sub=identity.sub,
        email=identity.email,
        name=identity.name,
        groups=identity.groups,
    )
    user = authenticated_user(db=db, sub=identity.sub)  # refuses inactive users
    return user_view(user), access_token, attempt.return_to
