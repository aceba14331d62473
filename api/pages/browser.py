"""What every page shares: the templates, who the browser is signed in as, and form checks."""

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from api.errors import status_for
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.settings import Settings
from models.sign_in.browser_sessions import (
    BROWSER_SESSION_LIFETIME,
    SignedInBrowser,
    browser_session_user,
    check_csrf,
    start_browser_session,
)

Result = TypeVar("Result")

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

SESSION_COOKIE = "accessgate_session"


def as_signed_in(signed_in: SignedInBrowser) -> dict[str, Any]:
    """What every page shows of the signed-in viewer: their name and the sign-out form."""
    return {"viewer": signed_in.user, "csrf_token": signed_in.csrf_token}


def signed_in_browser(request: Request, db: Session) -> SignedInBrowser | None:
    """Who the browser's session cookie signs in, if anyone (an inactive user is refused)."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    return browser_session_user(db=db, token=token, now=utc_now())


def to_sign_in(request: Request) -> RedirectResponse:
    """Send the browser to sign in, then back to the page it asked for."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/sign-in?{urlencode({'next': here})}", status_code=303)


def browser_signed_in(request: Request, db: Session, user_id: Any, page: str) -> Response:
    """Start a session for the user who just signed in, and go to ``page``."""
    token = start_browser_session(db=db, user_id=user_id, now=utc_now())
    response = RedirectResponse(page, status_code=303)
    settings: Settings = request.app.state.settings
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(BROWSER_SESSION_LIFETIME.total_seconds()),
        httponly=True,
        samesite="lax",  # sent when the provider sends the browser back, never on others' forms
        secure=urlsplit(settings.public_url).scheme == "https",
        path="/",
    )
    return response


async def checked_form(request: Request, signed_in: SignedInBrowser | None) -> dict[str, str]:
    """The form's fields, once it is known to come from this site's own page.

    Refused (403) when the browser says it comes from another origin, or, for a signed-in
    browser, when it lacks the session's CSRF token.
    """
    origin = request.headers.get("origin")
    settings: Settings = request.app.state.settings
    if origin is not None and origin != "null" and origin != _origin(settings.public_url):
        raise errors.Forbidden("this form was sent from another site")
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    if signed_in is not None:
        check_csrf(signed_in, fields.get("csrf_token"))
    return fields


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        template,
        context,
        status_code=status_code,
        headers={
            # Nothing on these pages comes from elsewhere, and nobody may frame them.
            "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
            "frame-ancestors 'none'; form-action 'self'",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        },
    )


def refusal(request: Request, error: errors.DomainError, **context: Any) -> HTMLResponse:
    """A page saying why the request was refused, with the status the API would answer."""
    return page(request, "notice.html", status_for(error), message=str(error), **context)


async def in_db(request: Request, work: Callable[[Session], Result]) -> Result:
    """Run ``work`` with a database session of its own, in a worker thread."""

    def run() -> Result:
        with db_scope(request.app.state.engine) as db:
            return work(db)

    return await run_in_threadpool(run)
