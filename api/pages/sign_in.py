"""Signing a browser in and out: through the identity provider, or with a local token."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from sqlmodel import Session

from api.deps import client_address
from api.pages.browser import (
    SESSION_COOKIE,
    as_signed_in,
    browser_signed_in,
    checked_form,
    in_db,
    page,
    refusal,
    signed_in_browser,
)
from models.core import errors
from models.core.clock import utc_now
from models.core.throttle import SIGN_INS
from models.sign_in import attempts
from models.sign_in.browser_sessions import end_browser_session
from models.sign_in.oidc import OidcClient
from models.sign_in.tokens import verify_local_token
from models.users.service import authenticated_user

router = APIRouter(include_in_schema=False)

DEFAULT_PAGE = "/sign-in/done"


def _next(request: Request, value: str | None) -> str:
    try:
        return attempts.check_page(value or DEFAULT_PAGE)
    except errors.InvalidRequest:
        return DEFAULT_PAGE


@router.get("/sign-in")
async def sign_in_page(request: Request) -> Response:
    """With a provider: off to it, and back to ``next`` signed in. Locally: the token form."""
    target = _next(request, request.query_params.get("next"))
    oidc: OidcClient | None = getattr(request.app.state, "oidc", None)
    if oidc is None:
        return page(request, "sign_in.html", next=target)
    try:
        url = await in_db(
            request,
            lambda _db: attempts.start_sign_in(
                client=oidc,
                secret_box=request.app.state.secret_box,
                return_to=None,
                page=target,
                now=utc_now(),
            ),
        )
    except errors.DomainError as error:
        return refusal(request, error)
    return RedirectResponse(url, status_code=303)


@router.post("/sign-in")
async def sign_in_with_token(request: Request) -> Response:
    """Local mode: a token from ``accessgate token`` signs the browser in.

    Wrong tokens are throttled per client address, like failed provider sign-ins.
    """
    throttle = request.app.state.throttle
    address = client_address(request)
    try:
        throttle.refuse_if_blocked(SIGN_INS, address=address)
        form = await checked_form(request, None)
        target = _next(request, form.get("next"))
        if getattr(request.app.state, "oidc", None) is not None:
            raise errors.NotFound("this service signs people in through its identity provider")
        sub = verify_local_token(
            key=request.app.state.secret_key, token=form.get("token", "").strip()
        )
    except errors.Unauthenticated as error:
        throttle.record_failure(SIGN_INS, address=address)
        reason = str(error)
        await in_db(
            request,
            lambda db: attempts.record_refused_sign_in(
                db, door="page", address=address, reason=reason, now=utc_now()
            ),
        )
        return page(request, "sign_in.html", 401, next=_next(request, None), error=str(error))
    except errors.DomainError as error:
        return refusal(request, error)

    def start(db: Session) -> Response:
        user = authenticated_user(db=db, sub=sub)
        attempts.record_sign_in(db, user, door="page", now=utc_now(), how="token")
        return browser_signed_in(request, db, user.id, target)

    try:
        return await in_db(request, start)
    except errors.DomainError as error:
        return refusal(request, error)


@router.get("/sign-in/done")
async def signed_in_page(request: Request) -> Response:
    """Where a browser lands when it signed in without a page to go back to."""

    def read(db: Session) -> Response:
        signed_in = signed_in_browser(request, db)
        if signed_in is None:
            return RedirectResponse("/sign-in", status_code=303)
        return page(
            request,
            "notice.html",
            ok=True,
            message="You are signed in. Open a review from its Slack card.",
            **as_signed_in(signed_in),
        )

    try:
        return await in_db(request, read)
    except errors.DomainError as error:
        return refusal(request, error)


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    try:
        signed_in = await in_db(request, lambda db: signed_in_browser(request, db))
        await checked_form(request, signed_in)
        if token:
            await in_db(request, lambda db: end_browser_session(db=db, token=token))
    except errors.DomainError as error:
        return refusal(request, error)
    response = page(request, "notice.html", ok=True, message="You are signed out.")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
