"""Bearer tokens of the ``local`` auth mode: HS256 JWTs signed with the service's secret key."""

from datetime import datetime, timedelta

import jwt

from models.core import errors

ISSUER = "accessgate"
AUDIENCE = "accessgate-api"
ALGORITHM = "HS256"


def issue_local_token(*, key: bytes, sub: str, now: datetime, ttl: timedelta) -> str:
    """Sign a token that names the user by ``sub`` and expires after ``ttl``."""
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + ttl}
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def verify_local_token(*, key: bytes, token: str) -> str:
    """Return the ``sub`` of a valid token, or raise Unauthenticated.

    Only HS256 is accepted, so a token claiming ``alg: none`` or another algorithm is refused
    before its signature is even considered.
    """
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["exp", "iat", "sub", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise errors.Unauthenticated("the token has expired; get a new one") from exc
    except jwt.InvalidTokenError as exc:
        raise errors.Unauthenticated("the token is not valid for this service") from exc
    sub = claims["sub"]
    if not isinstance(sub, str) or not sub:
        raise errors.Unauthenticated("the token names no user")
    return sub
