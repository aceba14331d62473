"""The review page: a review as a person reads it, with the decisions open to them."""

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from sqlmodel import Session

from api.errors import status_for
from api.pages.browser import (
    as_signed_in,
    checked_form,
    in_db,
    page,
    refusal,
    signed_in_browser,
    to_sign_in,
)
from api.urls import api_base
from models.chat.cards import review_card_facts
from models.core import errors
from models.core.clock import utc_now
from models.core.settings import Settings
from models.reviews.machine import Decision
from models.reviews.schema import Door, ReviewDecisionRequest, ReviewType
from models.reviews.service import (
    decision_history,
    decisions_open_to,
    get_review,
    update_review,
)
from models.reviews.timing import in_words
from models.sign_in.browser_sessions import SignedInBrowser

router = APIRouter(include_in_schema=False)

DONE = {
    Decision.APPROVED: "Your approval is recorded.",
    Decision.REJECTED: "You rejected this review.",
    Decision.REVOKED: "You revoked this access.",
}


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _review_context(
    request: Request, db: Session, signed_in: SignedInBrowser, review_ref: str
) -> dict[str, Any]:
    """Everything the page shows; NotFound unless the viewer may see the review."""
    viewer = signed_in.user
    review_id = get_review(db=db, review_ref=review_ref, viewer=viewer).id
    settings: Settings = request.app.state.settings
    facts = review_card_facts(
        db=db, review_id=review_id, api_base_url=api_base(settings.public_url)
    )
    if facts is None:
        raise errors.NotFound("review not found")
    kind = "one-time"
    if facts.type is ReviewType.JIT:
        kind = (
            f"just-in-time for {in_words(timedelta(microseconds=facts.access_duration_ns // 1000))}"
        )
    return {
        "review": facts,
        "status_word": "access ended" if facts.access_ended else facts.status.word,
        "kind": kind,
        "decisions": decision_history(db=db, review_id=review_id),
        "open_to": {
            decision.value
            for decision in decisions_open_to(
                db=db, review_id=review_id, viewer=viewer, now=utc_now()
            )
        },
        **as_signed_in(signed_in),
        "when": _when,
    }


@router.get("/reviews/{review_ref}")
async def review_page(review_ref: str, request: Request) -> Response:
    """A review, its groups and decisions, and the buttons its viewer may use."""

    def read(db: Session) -> Response:
        signed_in = signed_in_browser(request, db)
        if signed_in is None:
            return to_sign_in(request)
        context = _review_context(request, db, signed_in, review_ref)
        done = request.query_params.get("done")
        if done in DONE:
            context["done"] = DONE[Decision(done)]
        return page(request, "review.html", **context)

    try:
        return await in_db(request, read)
    except errors.DomainError as error:
        return refusal(request, error)


@router.post("/reviews/{review_ref}/decision")
async def decide_on_page(review_ref: str, request: Request) -> Response:
    """Approve, reject (with a reason) or revoke, through the same service as the API."""
    signed_in = await in_db(request, lambda db: signed_in_browser(request, db))
    if signed_in is None:
        return to_sign_in(request)
    try:
        form = await checked_form(request, signed_in)
        decision = ReviewDecisionRequest(
            status=form.get("status", ""),
            rejection_reason=(form.get("rejection_reason") or "").strip() or None,
        )
    except errors.DomainError as error:
        return refusal(request, error, **as_signed_in(signed_in))
    except ValueError:
        unknown = errors.InvalidRequest("the decision is not one of Approve, Reject or Revoke")
        return refusal(request, unknown, **as_signed_in(signed_in))

    def decide(db: Session) -> Response:
        try:
            review = update_review(
                db=db,
                review_ref=review_ref,
                actor=signed_in.user,
                request=decision,
                now=utc_now(),
                door=Door.PAGE,
            )
        except errors.DomainError as error:
            db.rollback()
            context = _review_context(request, db, signed_in, review_ref)
            return page(request, "review.html", status_for(error), error=str(error), **context)
        # After a POST, a GET: reloading the page does not decide twice.
        return RedirectResponse(
            f"/reviews/{review.id}?done={decision.status.value}", status_code=303
        )

    try:
        return await in_db(request, decide)
    except errors.DomainError as error:
        return refusal(request, error, **as_signed_in(signed_in))
