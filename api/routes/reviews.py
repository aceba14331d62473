from typing import Annotated

import structlog
from fastapi import APIRouter, Query, Request, Response

from api.deps import BearerSubject, CredentialsFirstRoute, answer_as_caller
from models.core import errors
from models.core.clock import utc_now
from models.reviews import listing
from models.reviews import service as review_service
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Door, ReviewDecisionRequest, ReviewPublic

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/reviews", tags=["reviews"])


@router.get("", response_model=listing.ReviewPage)
async def list_reviews(
    request: Request,
    subject: BearerSubject,
    status: ReviewStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=listing.MAX_CURSOR_LENGTH)] = None,
    offset: Annotated[str | None, Query(include_in_schema=False)] = None,
) -> Response:
    """Reviews the caller owns or reviews (admins: all), newest first, a page at a time.

    Walking `next_cursor` until it is null visits every such review once, even while new
    reviews are filed (those appear on a new walk). A page costs the same at any depth.
    """
    if offset is not None:
        # An old client paging by offset would otherwise get the first page forever.
        raise errors.InvalidRequest(
            "offset: paging is by cursor; pass the previous page's next_cursor as cursor"
        )

    return await answer_as_caller(
        request,
        subject,
        lambda db, caller: listing.list_reviews(
            db=db, viewer=caller, status=status, limit=limit, cursor=cursor
        ),
    )


@router.get("/{review_id}", response_model=ReviewPublic)
async def get_review(review_id: str, request: Request, subject: BearerSubject) -> Response:
    """One review, by its id or its session's id."""
    structlog.contextvars.bind_contextvars(review_id=review_id)
    return await answer_as_caller(
        request,
        subject,
        lambda db, caller: review_service.get_review(db=db, review_ref=review_id, viewer=caller),
    )


@router.put("/{review_id}", response_model=ReviewPublic)
async def update_review(
    review_id: str, decision: ReviewDecisionRequest, request: Request, subject: BearerSubject
) -> Response:
    """Approve, reject or revoke a review (by its id or its session's id) for the caller's groups.

    Updates the entry of every reviewer group the caller belongs to, then recomputes the overall
    status: APPROVED once enough groups approved, REJECTED or REVOKED at once.
    """
    structlog.contextvars.bind_contextvars(review_id=review_id)
    return await answer_as_caller(
        request,
        subject,
        lambda db, caller: review_service.update_review(
            db=db,
            review_ref=review_id,
            actor=caller,
            request=decision,
            now=utc_now(),
            door=Door.API,
        ),
    )
