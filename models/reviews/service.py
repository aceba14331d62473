"""Deciding and reading reviews: the one service both the API and the chat bot call."""

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, exists, func, or_
from sqlmodel import Session, col, select

from models.core import errors
from models.core.db import write_transaction
from models.delivery.outbox import EventKind, record_review_event
from models.reviews.machine import Decision, Outcome, Reviewer, ReviewState, ReviewStatus, decide
from models.reviews.schema import (
    Door,
    Review,
    ReviewDecisionRecord,
    ReviewDecisionRequest,
    ReviewGroup,
    ReviewGroupPublic,
    ReviewOwnerPublic,
    ReviewPublic,
    ReviewType,
    TimeWindow,
)
from models.users.schema import User

REVIEW_NOT_FOUND = "review not found"


def update_review(
    *,
    db: Session,
    review_ref: str,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
    door: Door = Door.API,
) -> ReviewPublic:
    """Apply a reviewer's decision to the review named by its id or its session's id.

    The review row is locked for the whole transaction, so simultaneous decisions on one review
    apply one after the other and none is lost.
    """
    with write_transaction(db):
        review = _lock_review(db, review_ref, actor)
        entries = list(
            db.exec(
                select(ReviewGroup)
                .where(ReviewGroup.review_id == review.id)
                .order_by(col(ReviewGroup.group))
            )
        )
        before = ReviewState(
            status=review.status,
            owner_id=review.owner_id,
            entries={entry.group: entry.status for entry in entries},
            force_approval_groups=frozenset(review.force_approval_groups),
            min_approvals=review.min_approvals,
            approved_by=frozenset(
                entry.reviewed_by_id
                for entry in entries
                if entry.status is ReviewStatus.APPROVED and entry.reviewed_by_id is not None
            ),
            distinct_approvers=review.distinct_approvers,
            no_self_force_approval=review.no_self_force_approval,
        )
        reviewer = Reviewer(id=actor.id, groups=frozenset(actor.groups), is_admin=actor.is_admin)
        outcome = decide(before, reviewer, request.status, force=request.force_review)
        window_changes = _window_change(db, review, request)
        if outcome.changes(before) or window_changes:
            _apply(db, review, entries, outcome, actor=actor, request=request, now=now)
            _record(db, review, before, outcome, actor=actor, request=request, door=door, now=now)
    # Rendered from what this transaction already holds; only other reviewers are looked up.
    return _review_view(review, _entry_views(db, entries, known_users=[actor]))


def _window_change(db: Session, review: Review, request: ReviewDecisionRequest) -> bool:
    """Whether the approval sets the review's time window; Conflict if it would change one.

    The first window set is the one every later approver agreed to (or may refuse by
    rejecting), so nobody can widen it afterwards; and an APPROVED review's window never
    changes, as the approvals were given for it.
    """
    if request.time_window is None:
        return False
    wanted = request.time_window.model_dump()
    if wanted == review.time_window:
        return False
    if review.time_window is not None:
        setter = (
            None
            if review.time_window_set_by_id is None
            else db.get(User, review.time_window_set_by_id)
        )
        window = review.time_window["configuration"]
        raise errors.Conflict(
            f"this review's time window ({window['start_time']}-{window['end_time']} UTC) was "
            f"set by {_who(setter)}; an approval may repeat it but not change it"
        )
    if review.status is not ReviewStatus.PENDING:
        raise errors.Conflict(
            f"this review is already {review.status} without a time window; it cannot get one now"
        )
    return True


def _who(user: User | None) -> str:
    if user is None:
        return "an earlier approver"
    return user.name or user.email or user.sub


def _named_by(review_ref: str) -> ColumnElement[bool]:
    """The review whose id, or whose session's id, is ``review_ref``; NotFound if not a uuid."""
    try:
        ref = uuid.UUID(review_ref)
    except ValueError as exc:
        raise errors.NotFound(REVIEW_NOT_FOUND) from exc
    return or_(col(Review.id) == ref, col(Review.session_id) == ref)


def _lock_review(db: Session, review_ref: str, actor: User) -> Review:
    statement = (
        select(Review)
        .where(_named_by(review_ref))
        .where(Review.organization_id == actor.organization_id)
        .with_for_update()
    )
    review = db.exec(statement).first()
    if review is None:
        raise errors.NotFound(REVIEW_NOT_FOUND)
    return review


def _apply(
    db: Session,
    review: Review,
    entries: list[ReviewGroup],
    outcome: Outcome,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
) -> None:
    for entry in entries:
        if entry.group in outcome.entries:
            entry.status = outcome.entries[entry.group]
            entry.reviewed_by_id = actor.id
            entry.review_date = now
            entry.forced_review = outcome.forced
            db.add(entry)
    if request.time_window is not None and review.time_window is None:
        review.time_window = request.time_window.model_dump()
        review.time_window_set_by_id = actor.id
    if outcome.status is not review.status:
        _enter_status(review, outcome.status, actor=actor, request=request, now=now)
    db.add(review)


def _enter_status(
    review: Review,
    status: ReviewStatus,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
) -> None:
    review.status = status
    if status is ReviewStatus.APPROVED and review.type is ReviewType.JIT:
        review.revoke_at = now + timedelta(microseconds=review.access_duration // 1000)
    elif status in (ReviewStatus.REJECTED, ReviewStatus.REVOKED):
        review.ended_by_id = actor.id
        review.ended_at = now
        if status is ReviewStatus.REVOKED:
            review.revoke_at = now
        else:
            review.rejection_reason = request.rejection_reason


def _record(
    db: Session,
    review: Review,
    before: ReviewState,
    outcome: Outcome,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    door: Door,
    now: datetime,
) -> None:
    db.add(
        ReviewDecisionRecord(
            review_id=review.id,
            actor_id=actor.id,
            door=door,
            decision=request.status,
            forced=outcome.forced,
            groups=sorted(outcome.entries),
            status_before=before.status,
            status_after=outcome.status,
            created_at=now,
        )
    )
    record_review_event(
        db,
        kind=EventKind.REVIEW_UPDATED,
        review_id=review.id,
        session_id=review.session_id,
        status=outcome.status.value,
        now=now,
        details={
            "status_before": before.status.value,
            "decision": request.status.value,
            "groups": sorted(outcome.entries),
            "actor_id": str(actor.id),
            "door": door.value,
        },
    )


# -- reading ----------------------------------------------------------------------------------


def _visible_to(viewer: User) -> list[ColumnElement[bool]]:
    """Conditions limiting reviews to those ``viewer`` may see."""
    conditions: list[ColumnElement[bool]] = [col(Review.organization_id) == viewer.organization_id]
    if not viewer.is_admin:
        in_reviewer_group = exists().where(
            col(ReviewGroup.review_id) == col(Review.id), col(ReviewGroup.group).in_(viewer.groups)
        )
        conditions.append(or_(col(Review.owner_id) == viewer.id, in_reviewer_group))
    return conditions


def get_review(*, db: Session, review_ref: str, viewer: User) -> ReviewPublic:
    """The review named by its id or session id, if ``viewer`` owns it, reviews it or is admin."""
    statement = select(Review).where(_named_by(review_ref), *_visible_to(viewer))
    review = db.exec(statement).first()
    if review is None:
        raise errors.NotFound(REVIEW_NOT_FOUND)
    return review_views(db, [review])[0]


def list_reviews(
    *,
    db: Session,
    viewer: User,
    status: ReviewStatus | None,
    limit: int,
    offset: int,
) -> tuple[list[ReviewPublic], int]:
    """A page of the reviews ``viewer`` may see, newest first, and how many there are in all."""
    conditions = _visible_to(viewer)
    if status is not None:
        conditions.append(col(Review.status) == status)
    total = db.exec(select(func.count()).select_from(Review).where(*conditions)).one()
    page = db.exec(
        select(Review)
        .where(*conditions)
        .order_by(col(Review.created_at).desc(), col(Review.id))
        .limit(limit)
        .offset(offset)
    ).all()
    return review_views(db, page), total


def reviews_waiting_on(*, db: Session, reviewer: User, limit: int) -> list[uuid.UUID]:
    """Pending reviews, oldest first, where one of ``reviewer``'s groups has not decided yet.

    The reviewer's own sessions are left out: they cannot approve those.
    """
    if not reviewer.groups:
        return []
    undecided_group_of_reviewer = exists().where(
        col(ReviewGroup.review_id) == col(Review.id),
        col(ReviewGroup.group).in_(reviewer.groups),
        col(ReviewGroup.status) == ReviewStatus.PENDING,
    )
    statement = (
        select(Review.id)
        .where(
            col(Review.organization_id) == reviewer.organization_id,
            col(Review.status) == ReviewStatus.PENDING,
            col(Review.owner_id) != reviewer.id,
            undecided_group_of_reviewer,
        )
        .order_by(col(Review.created_at), col(Review.id))
        .limit(limit)
    )
    return list(db.exec(statement))


def review_views(db: Session, reviews: Sequence[Review]) -> list[ReviewPublic]:
    """Render reviews with their entries and reviewers, in two queries whatever their number."""
    if not reviews:
        return []
    entries = db.exec(
        select(ReviewGroup)
        .where(col(ReviewGroup.review_id).in_([r.id for r in reviews]))
        .order_by(col(ReviewGroup.group))
    ).all()
    views = _entry_views(db, entries, known_users=[])
    views_by_review: dict[uuid.UUID, list[ReviewGroupPublic]] = {r.id: [] for r in reviews}
    for entry, view in zip(entries, views, strict=True):
        views_by_review[entry.review_id].append(view)
    return [_review_view(review, views_by_review[review.id]) for review in reviews]


def _entry_views(
    db: Session, entries: Sequence[ReviewGroup], *, known_users: list[User]
) -> list[ReviewGroupPublic]:
    """Render entries in their order, fetching the reviewers not in ``known_users``."""
    users = {user.id: user for user in known_users}
    missing = {e.reviewed_by_id for e in entries if e.reviewed_by_id} - users.keys()
    if missing:
        users.update((u.id, u) for u in db.exec(select(User).where(col(User.id).in_(missing))))
    return [_entry_view(entry, users) for entry in entries]


def _entry_view(entry: ReviewGroup, reviewers: dict[uuid.UUID, User]) -> ReviewGroupPublic:
    reviewer = reviewers.get(entry.reviewed_by_id) if entry.reviewed_by_id else None
    return ReviewGroupPublic(
        id=entry.id,
        group=entry.group,
        status=entry.status,
        reviewed_by=None
        if reviewer is None
        else ReviewOwnerPublic(
            id=reviewer.id, name=reviewer.name, email=reviewer.email, chat_id=reviewer.chat_id or ""
        ),
        review_date=entry.review_date,
        forced_review=entry.forced_review,
    )


def _review_view(review: Review, entries: list[ReviewGroupPublic]) -> ReviewPublic:
    return ReviewPublic(
        id=review.id,
        session=review.session_id,
        type=review.type,
        status=review.status,
        review_groups_data=entries,
        min_approvals=review.min_approvals,
        force_approval_groups=review.force_approval_groups,
        time_window=None if review.time_window is None else TimeWindow(**review.time_window),
        access_duration=review.access_duration,
        access_request_rule_name=review.access_request_rule_name,
        rejection_reason=review.rejection_reason,
        created_at=review.created_at,
        revoke_at=review.revoke_at,
        listener_name=review.listener_name,
        sidecar_id=review.sidecar_id,
    )


__all__ = [
    "Decision",
    "get_review",
    "list_reviews",
    "review_views",
    "reviews_waiting_on",
    "update_review",
]
