"""Linking a Slack account from the link ``/accessgate link`` gave: sign in, then confirm."""

from fastapi import APIRouter, Request, Response
from sqlmodel import Session

from api.deps import client_address
from api.pages.browser import (
    as_signed_in,
    checked_form,
    in_db,
    page,
    refusal,
    signed_in_browser,
    to_sign_in,
)
from models.chat.links import finish_chat_link
from models.core import errors
from models.core.clock import utc_now
from models.core.throttle import CHAT_LINK_CODES

router = APIRouter(include_in_schema=False)
MAX_CODE_LENGTH = 64


@router.get("/chat/link")
async def link_page(request: Request) -> Response:
    """Who is about to be linked, and the button that does it (nothing happens on a GET)."""
    code = request.query_params.get("code", "")[:MAX_CODE_LENGTH]

    def read(db: Session) -> Response:
        signed_in = signed_in_browser(request, db)
        if signed_in is None:
            return to_sign_in(request)
        return page(request, "chat_link.html", code=code, **as_signed_in(signed_in))

    try:
        return await in_db(request, read)
    except errors.DomainError as error:
        return refusal(request, error)


@router.post("/chat/link")
async def link(request: Request) -> Response:
    """Use up the code and link its Slack user to the signed-in user.

    Wrong codes are throttled per user and client address, as in the API.
    """
    signed_in = await in_db(request, lambda db: signed_in_browser(request, db))
    if signed_in is None:
        return to_sign_in(request)
    context = as_signed_in(signed_in)
    throttle = request.app.state.throttle
    address, principal = client_address(request), str(signed_in.user.id)
    try:
        throttle.refuse_if_blocked(CHAT_LINK_CODES, address=address, principal=principal)
        form = await checked_form(request, signed_in)
        code = form.get("code", "")[:MAX_CODE_LENGTH]
        try:
            await in_db(
                request,
                lambda db: finish_chat_link(
                    db=db, actor=signed_in.user, code=code, now=utc_now(), door="page"
                ),
            )
        except errors.UnknownCode:
            throttle.record_failure(CHAT_LINK_CODES, address=address, principal=principal)
            raise
    except errors.DomainError as error:
        return refusal(request, error, **context)
    return page(
        request,
        "notice.html",
        ok=True,
        message="Your Slack account is linked. Reviews waiting on you now show in Slack.",
        **context,
    )
