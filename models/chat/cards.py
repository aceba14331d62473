"""What a chat card shows of a review: one read of everything a reviewer needs to decide.

The card is rendered from the review's current state every time it is posted or rewritten, so a
card never shows a decision older than the newest one, whatever order events arrive in.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review, ReviewGroupPublic, ReviewType
from models.reviews.service import review_views
from models.sessions.schema import GatewaySession
from models.sidecars.schema import Sidecar
from models.users.schema import User, UserStatus


@dataclass(frozen=True)
class GroupLine:
    """One reviewer group's status on the card, with who decided and when."""

    group: str
    status: ReviewStatus
    reviewed_by_name: str | None
    reviewed_by_chat_id: str | None
    reviewed_at: datetime | None
    forced: bool


@dataclass(frozen=True)
class ReviewCardFacts:
    """Everything a card shows; read once from the database, rendered by pure functions."""

    review_id: uuid.UUID
    session_id: uuid.UUID
    organization_id: uuid.UUID
    requester_id: uuid.UUID
    status: ReviewStatus
    type: ReviewType
    access_duration_ns: int
    requester_name: str
    requester_email: str
    requester_chat_id: str | None
    connection_name: str
    script: str
    created_at: datetime
    groups: tuple[GroupLine, ...]
    force_approval_groups: tuple[str, ...]
    min_approvals: int | None
    time_window: tuple[str, str] | None
    rejection_reason: str | None
    revoke_at: datetime | None
    ended_by_name: str | None
    ended_at: datetime | None
    api_url: str
    page_url: str = ""  # the review page people open; empty in facts made without a site
    reason: str | None = None
    expires_at: datetime | None = None
    sidecar_name: str | None = None  # where a sidecar-filed review came from
    listener_name: str | None = None
    access_ended: bool = False  # a JIT grant whose end has come and was told


def review_card_facts(
    *, db: Session, review_id: uuid.UUID, api_base_url: str
) -> ReviewCardFacts | None:
    """The facts of one review's card, or None if the review no longer exists."""
    row = db.exec(
        select(Review, GatewaySession, User)
        .join(GatewaySession, col(GatewaySession.id) == Review.session_id)
        .join(User, col(User.id) == Review.owner_id)
        .where(Review.id == review_id)
    ).first()
    if row is None:
        return None
    review, gateway_session, requester = row
    # The entries as the API shows them, reviewers included: one way to read them.
    view = review_views(db, [review])[0]
    ended_by = db.get(User, review.ended_by_id) if review.ended_by_id else None
    sidecar = db.get(Sidecar, review.sidecar_id) if review.sidecar_id else None
    window = view.time_window.configuration if view.time_window else None
    return ReviewCardFacts(
        review_id=review.id,
        session_id=review.session_id,
        organization_id=review.organization_id,
        requester_id=review.owner_id,
        status=review.status,
        type=review.type,
        access_duration_ns=review.access_duration,
        requester_name=requester.name,
        requester_email=requester.email,
        requester_chat_id=requester.chat_id,
        connection_name=review.connection_name,
        script=gateway_session.script,
        created_at=review.created_at,
        groups=tuple(_group_line(entry) for entry in view.review_groups_data),
        force_approval_groups=tuple(review.force_approval_groups),
        min_approvals=review.min_approvals,
        time_window=None if window is None else (window["start_time"], window["end_time"]),
        rejection_reason=review.rejection_reason,
        revoke_at=review.revoke_at,
        ended_by_name=None if ended_by is None else (ended_by.name or ended_by.email),
        ended_at=review.ended_at,
        api_url=f"{api_base_url.rstrip('/')}/reviews/{review.id}",
        page_url=f"{site_url(api_base_url)}/reviews/{review.id}",
        reason=review.reason,
        expires_at=review.expires_at,
        sidecar_name=None if sidecar is None else sidecar.name,
        listener_name=review.listener_name,
        access_ended=review.access_end_told,
    )


def site_url(api_base_url: str) -> str:
    """The site the API is served under (at ``/api``): where people's pages are."""
    return api_base_url.rstrip("/").removesuffix("/api")


def _group_line(entry: ReviewGroupPublic) -> GroupLine:
    reviewer = entry.reviewed_by
    return GroupLine(
        group=entry.group,
        status=entry.status,
        reviewed_by_name=None if reviewer is None else (reviewer.name or reviewer.email),
        reviewed_by_chat_id=None if reviewer is None else (reviewer.chat_id or None),
        reviewed_at=entry.review_date,
        forced=entry.forced_review,
    )


def linked_reviewers(*, db: Session, facts: ReviewCardFacts) -> list[str]:
    """The chat ids of active, linked users who review this review: whose App Home lists it.

    Members of its reviewer groups and force-approval groups, but not its requester (nobody
    reviews their own session). The groups come from the card's facts, read just before.
    """
    groups = set(facts.force_approval_groups) | {line.group for line in facts.groups}
    return _linked_members(db, facts, groups)


def mentioned_reviewers(*, db: Session, facts: ReviewCardFacts) -> list[str]:
    """The chat ids a reminder mentions: linked reviewers of the groups still undecided, but
    not those who take their reminders as a digest DM."""
    undecided = {line.group for line in facts.groups if line.status is ReviewStatus.PENDING}
    return _linked_members(db, facts, undecided, digest_takers=False)


def _linked_members(
    db: Session, facts: ReviewCardFacts, groups: set[str], *, digest_takers: bool = True
) -> list[str]:
    """Chat ids of the active, linked members of ``groups``, the requester left out."""
    statement = select(User).where(
        User.organization_id == facts.organization_id,
        col(User.chat_id).is_not(None),
        User.status == UserStatus.ACTIVE,
        User.id != facts.requester_id,
    )
    if not digest_takers:
        statement = statement.where(col(User.reminders_by_dm).is_(False))
    return sorted(
        user.chat_id
        for user in db.exec(statement)
        if user.chat_id and groups.intersection(user.groups)
    )
