from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from api.deps import (
    CredentialsFirstRoute,
    DbDep,
    SecretBoxDep,
    ThrottleDep,
    client_address,
)
from api.pages.browser import browser_signed_in
from models.core import errors
from models.core.clock import utc_now
from models.core.throttle import SIGN_INS
from models.sign_in import attempts
from models.sign_in.oidc import OidcClient
from models.users.schema import UserPublic

router = APIRouter(route_class=CredentialsFirstRoute, tags=["sign-in"])


class LoginAnswer(BaseModel):
    login_url: str


class SignedIn(BaseModel):
    access_token: str
    token_type: str = "Bearer"  # noqa: S105 - the scheme, not a secret
    user: UserPublic


def _oidc(request: Request) -> OidcClient:
    client: OidcClient | None = getattr(request.app.state, "oidc", None)
    if client is None:
        raise errors.NotFound(
            "sign-in with an identity provider is off: this service runs with "
            "ACCESSGATE_AUTH=local (tokens come from `accessgate token`)"
        )
    return client


@router.get("/login")
def login(
    request: Request,
    secret_box: SecretBoxDep,
    redirect: Annotated[str | None, Query(max_length=2048)] = None,
) -> LoginAnswer:
    """The URL that leads to the identity provider (code flow with PKCE, state and nonce).

    `redirect` (a loopback address) is where a command-line client wants the token delivered.
    Nothing is stored: the attempt travels sealed in the URL's `state`.
    """
    url = attempts.start_sign_in(
        client=_oidc(request), secret_box=secret_box, return_to=redirect, now=utc_now()
    )
    return LoginAnswer(login_url=url)


@router.get("/callback", response_model=SignedIn, responses={302: {"description": "To the app"}})
def callback(
    request: Request,
    db: DbDep,
    throttle: ThrottleDep,
    secret_box: SecretBoxDep,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    state: Annotated[str | None, Query(max_length=4096)] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
) -> Any:
    """Where the identity provider sends the browser back: the token, by redirect or as JSON.

    Failed sign-ins are throttled per client address (429 with `Retry-After`).
    """
    client = _oidc(request)
    address = client_address(request)
    throttle.refuse_if_blocked(SIGN_INS, address=address)
    try:
        if error is not None or not code or not state:
            raise errors.Unauthenticated(
                f"the identity provider did not sign you in ({error or 'no code'}); try again"
            )
        signed_in = attempts.finish_sign_in(
            db=db, client=client, secret_box=secret_box, code=code, state=state, now=utc_now()
        )
    except errors.Unauthenticated as refusal:
        throttle.record_failure(SIGN_INS, address=address)
        attempts.record_refused_sign_in(
            db, door="api", address=address, reason=str(refusal), now=utc_now()
        )
        raise
    if signed_in.page is not None:  # a browser signing in to a page: a session, not a token
        return browser_signed_in(request, db, signed_in.user.id, signed_in.page)
    target = signed_in.return_to or request.app.state.settings.oidc_redirect_url
    if target:
        separator = "&" if "?" in target else "?"
        token = urlencode({"token": signed_in.access_token})
        return RedirectResponse(f"{target}{separator}{token}", 302)
    return SignedIn(access_token=signed_in.access_token, user=signed_in.user)
