from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep
from models.core.clock import utc_now
from models.reviews import service as review_service
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Door, ReviewDecisionRequest, ReviewPublic

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/reviews", tags=["reviews"])

MAX_OFFSET = 2**31
"""Keeps the offset inside every backend's integer range."""


class ReviewPage(BaseModel):
    items: list[ReviewPublic]
    total: int
    limit: int
    offset: int


@router.get("")
def list_reviews(
    db: DbDep,
    user: CurrentUser,
    status: ReviewStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> ReviewPage:
    """Reviews the caller owns or reviews (admins: all), newest first."""
    items, total = review_service.list_reviews(
        db=db, viewer=user, status=status, limit=limit, offset=offset
    )
    return ReviewPage(items=items, total=total, limit=limit, offset=offset)


@router.get("/{review_id}")
def get_review(review_id: str, db: DbDep, user: CurrentUser) -> ReviewPublic:
    """One review, by its id or its session's id."""
    return review_service.get_review(db=db, review_ref=review_id, viewer=user)


@router.put("/{review_id}")
def update_review(
    review_id: str, request: ReviewDecisionRequest, db: DbDep, user: CurrentUser
) -> ReviewPublic:
    """Approve, reject or revoke a review (by its id or its session's id) for the caller's groups.

    Updates the entry of every reviewer group the caller belongs to, then recomputes the overall
    status: APPROVED once enough groups approved, REJECTED or REVOKED at once.
    """
    return review_service.update_review(
        db=db,
        review_ref=review_id,
        actor=user,
        request=request,
        now=utc_now(),
        door=Door.API,
    )
