"""Sign-in attempts: carried from the login URL to the callback sealed in ``state`` itself.

Nothing is written when someone asks for a login URL: an anonymous caller could otherwise fill
the database (and, on SQLite, queue every writer) with attempts. The attempt's secrets (a seed
from which the nonce and the PKCE verifier are derived), where the sign-in should return, and
when it started travel in the ``state`` parameter, sealed with the service's secret key: a
client can neither read the verifier in it nor make one up. Replicas share the key, so any of
them can finish a sign-in another started. A code is used once by the provider, so a state seen
twice cannot sign anyone in twice.
"""

import base64
import hashlib
import ipaddress
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlmodel import Session

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.core import errors
from models.core.db import write_transaction
from models.core.sealing import SecretBox, UnsealError
from models.sign_in.oidc import OidcClient
from models.users.schema import User, UserPublic
from models.users.service import (
    authenticated_user,
    default_organization,
    upsert_user,
    user_view,
)

ATTEMPT_LIFETIME = timedelta(minutes=10)
STATE_CONTEXT = "sign_in_state"
UNKNOWN_ATTEMPT = "this sign-in is unknown or expired; start it again"


def _derived(seed: bytes, purpose: str) -> str:
    digest = hashlib.sha256(purpose.encode() + b"\x00" + seed).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


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


def check_page(path: str) -> str:
    """A page of this site to go back to after a browser signs in: a path, never another site."""
    parts = urlsplit(path)
    if not path.startswith("/") or path.startswith("//") or "\\" in path or parts.netloc:
        raise errors.InvalidRequest("next must be a path on this site, such as /reviews/<id>")
    return path


def start_sign_in(
    *,
    client: OidcClient,
    secret_box: SecretBox,
    return_to: str | None,
    now: datetime,
    page: str | None = None,
) -> str:
    """The URL that leads to the identity provider, carrying this attempt in its state.

    ``return_to`` is a command-line client's loopback address (it gets the token); ``page`` a
    page of this site, where a browser goes back signed in (it gets a session cookie).
    """
    if return_to is not None:
        check_return_to(return_to)
    if page is not None:
        check_page(page)
    seed = secrets.token_bytes(32)
    attempt = {
        "seed": base64.b64encode(seed).decode(),
        "return_to": return_to,
        "page": page,
        "at": now.timestamp(),
    }
    state = secret_box.seal(json.dumps(attempt).encode(), context=STATE_CONTEXT)
    return client.authorization_url(
        state=state,
        nonce=_derived(seed, "nonce"),
        code_verifier=_derived(seed, "pkce code verifier"),
    )


def _open_attempt(secret_box: SecretBox, state: str, now: datetime) -> dict[str, Any]:
    try:
        attempt = json.loads(secret_box.open(state, context=STATE_CONTEXT))
    except (UnsealError, ValueError) as exc:
        raise errors.Unauthenticated(UNKNOWN_ATTEMPT) from exc
    started = datetime.fromtimestamp(float(attempt["at"]), tz=now.tzinfo)
    if not now - ATTEMPT_LIFETIME <= started <= now + timedelta(minutes=1):
        raise errors.Unauthenticated(UNKNOWN_ATTEMPT)
    return dict(attempt)


@dataclass(frozen=True)
class SignedIn:
    user: UserPublic
    access_token: str  # for API calls
    return_to: str | None  # a command-line client's loopback address
    page: str | None  # a page of this site, for a browser


def finish_sign_in(
    *, db: Session, client: OidcClient, secret_box: SecretBox, code: str, state: str, now: datetime
) -> SignedIn:
    """Check the state and the provider's answer, then sign the user up or refresh them.

    Returns the user, the access token for API calls, and where the attempt asked to go back.
    Nothing is written before the provider has accepted the code.
    """
    attempt = _open_attempt(secret_box, state, now)
    seed = base64.b64decode(attempt["seed"])
    identity, access_token = client.finish_login(
        code=code,
        code_verifier=_derived(seed, "pkce code verifier"),
        nonce=_derived(seed, "nonce"),
    )
    upsert_user(
        db=db,
        sub=identity.sub,
        email=identity.email,
        name=identity.name,
        groups=identity.groups,
    )
    user = authenticated_user(db=db, sub=identity.sub)  # refuses inactive users
    page = attempt.get("page")
    record_sign_in(
        db, user, door="api" if page is None else "page", now=now, how="identity provider"
    )
    return SignedIn(
        user=user_view(user),
        access_token=access_token,
        return_to=attempt["return_to"],
        page=attempt.get("page"),
    )


def record_sign_in(db: Session, user: User, *, door: str, now: datetime, how: str) -> None:
    """A sign-in that succeeded, in the audit trail."""
    with write_transaction(db):
        record_audit(
            db,
            kind=AuditKind.SIGN_IN,
            actor=user,
            door=door,
            target=f"user:{user.sub}",
            now=now,
            details={"how": how},
        )


def record_refused_sign_in(
    db: Session, *, door: str, address: str, reason: str, now: datetime
) -> None:
    """A sign-in that was refused, in the audit trail (of the default organization: whoever
    tried is not known)."""
    db.rollback()
    with write_transaction(db):
        record_audit(
            db,
            kind=AuditKind.SIGN_IN_REFUSED,
            actor=None,
            organization_id=default_organization(db).id,
            door=door,
            target="sign-in",
            now=now,
            details={"address": address, "reason": reason},
        )
