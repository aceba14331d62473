"""Deciding and reading reviews: the one service both the API and the chat bot call."""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, exists, insert, or_, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from models.audit.schema import AuditKind
from models.audit.service import SYSTEM_ACTOR, record_audit
from models.core import errors
from models.core.db import new_id, table_of, write_transaction
from models.core.metrics import DECISIONS
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
from models.reviews.timing import in_words
from models.users.schema import User
from models.webhooks.events import publish_event
from models.webhooks.schema import WebhookKind

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

    A PENDING review past its deadline is expired here and then (committed), and the decision
    refused: nobody decides a review late because the scheduler has not come round yet.

    This is every reviewer's hot path, so it is written as a few prebuilt statements rather
    than through the ORM's unit of work: the review read and locked, its entries read with
    their reviewers, one update per kind of change, the decision and its outbox event
    inserted; the answer is rendered from what the transaction already holds.
    """
    with write_transaction(db):
        locked = _lock_review(db, review_ref, actor)
        review = locked.review
        expired = is_past_deadline(review, now)
        if expired:  # the scheduler has not got to it yet: it expires now, not decided late
            expire_review(db, review, now=now)
        else:
            entries = _decide(db, locked, actor=actor, request=request, now=now, door=door)
    if expired:
        raise errors.ReviewClosed(
            "this review is REJECTED and accepts no further decisions: it expired at "
            f"{review['expires_at'].isoformat()}"
        )
    return _review_view(review, [entry.view() for entry in entries])


def _decide(
    db: Session,
    locked: "_Locked",
    *,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
    door: Door,
) -> list["_Entry"]:
    """Apply the decision to the locked review; return its entries as they now are."""
    review, entries = locked.review, locked.entries
    before = _state_of(review, entries)
    reviewer = _reviewer(actor)
    outcome = decide(before, reviewer, request.status, force=request.force_review)
    window_changes = _window_change(db, review, request)
    if outcome.changes(before) or window_changes:
        entries = _apply(db, locked, outcome, actor=actor, request=request, now=now)
        _record(db, review, before, outcome, actor=actor, request=request, door=door, now=now)
    return entries


def _state_of(review: Mapping[str, Any], entries: Sequence["_Entry"]) -> ReviewState:
    """What the state machine needs of a review and its entries."""
    return ReviewState(
        status=review["status"],
        owner_id=review["owner_id"],
        entries={entry.group: entry.status for entry in entries},
        force_approval_groups=frozenset(review["force_approval_groups"]),
        min_approvals=review["min_approvals"],
        approved_by=frozenset(
            entry.reviewed_by_id
            for entry in entries
            if entry.status is ReviewStatus.APPROVED and entry.reviewed_by_id is not None
        ),
        distinct_approvers=review["distinct_approvers"],
        no_self_force_approval=review["no_self_force_approval"],
    )


def _reviewer(actor: User) -> Reviewer:
    return Reviewer(id=actor.id, groups=frozenset(actor.groups), is_admin=actor.is_admin)


def decisions_open_to(
    *, db: Session, review_id: uuid.UUID, viewer: User, now: datetime
) -> list[Decision]:
    """The decisions ``viewer`` may make on the review now, as the state machine rules them:
    what a page offers as buttons (the decision itself is ruled again when it is made)."""
    row = (
        db.execute(core_select(_review_table).where(_review_table.c.id == review_id))
        .mappings()
        .first()
    )
    if row is None or is_past_deadline(dict(row), now):
        return []
    state = _state_of(dict(row), _read_entries(db, [review_id]))
    open_to: list[Decision] = []
    for decision in (Decision.APPROVED, Decision.REJECTED, Decision.REVOKED):
        try:
            outcome = decide(state, _reviewer(viewer), decision, force=False)
        except errors.DomainError:
            continue
        if outcome.changes(state):
            open_to.append(decision)
    return open_to


@dataclass(frozen=True)
class DecisionLine:
    """One accepted decision as people read it: who, when, through which door, and what."""

    actor_name: str  # "accessgate" for the service's own (an expiry)
    door: Door
    decision: Decision
    groups: list[str]
    forced: bool
    status_after: ReviewStatus
    at: datetime


def decision_history(*, db: Session, review_id: uuid.UUID) -> list[DecisionLine]:
    """Every decision accepted on the review, oldest first."""
    record = table_of(ReviewDecisionRecord)
    rows = db.execute(
        core_select(record, _user_table.c.name, _user_table.c.email, _user_table.c.sub)
        .select_from(record.outerjoin(_user_table, _user_table.c.id == record.c.actor_id))
        .where(record.c.review_id == review_id)
        .order_by(record.c.created_at, record.c.id)
    ).mappings()
    return [
        DecisionLine(
            actor_name="accessgate"
            if row["actor_id"] is None
            else (row["name"] or row["email"] or row["sub"]),
            door=row["door"],
            decision=row["decision"],
            groups=list(row["groups"]),
            forced=row["forced"],
            status_after=row["status_after"],
            at=row["created_at"],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class _Entry:
    """A reviewer group's entry as the decision reads it, with the reviewer who decided it."""

    id: uuid.UUID
    review_id: uuid.UUID
    group: str
    status: ReviewStatus
    reviewed_by_id: uuid.UUID | None
    reviewed_by: ReviewOwnerPublic | None
    review_date: datetime | None
    forced_review: bool

    def view(self) -> ReviewGroupPublic:
        return ReviewGroupPublic(
            id=self.id,
            group=self.group,
            status=self.status,
            reviewed_by=self.reviewed_by,
            review_date=self.review_date,
            forced_review=self.forced_review,
        )


@dataclass
class _Locked:
    review: dict[str, Any]
    """The review's columns, updated in place as the decision changes them."""
    entries: list[_Entry]


_review_table = table_of(Review)
_entry_table = table_of(ReviewGroup)
_user_table = table_of(User)
_LOCK_STATEMENT = (
    core_select(_review_table)
    .where(
        or_(_review_table.c.id == bindparam("ref"), _review_table.c.session_id == bindparam("ref")),
        _review_table.c.organization_id == bindparam("organization_id"),
    )
    .with_for_update()
)
# Read after the lock is held, in a statement of its own: on PostgreSQL a statement that waited
# for a row lock sees the locked row as it is now but the rows it joined as they were when it
# started, which would lose the decision committed meanwhile.
_ENTRIES_STATEMENT = (
    core_select(
        # Only what is shown: every id read is parsed, and lists read a few hundred.
        *(
            _entry_table.c[name]
            for name in (
                "id",
                "review_id",
                "group",
                "status",
                "reviewed_by_id",
                "review_date",
                "forced_review",
            )
        ),
        *(
            _user_table.c[name].label(f"reviewer_{name}")
            for name in ("id", "name", "email", "chat_id")
        ),
    )
    .select_from(
        _entry_table.outerjoin(_user_table, _user_table.c.id == _entry_table.c.reviewed_by_id)
    )
    .where(_entry_table.c.review_id.in_(bindparam("review_ids", expanding=True)))
    .order_by(_entry_table.c.group)
)


def _read_entries(db: Session, review_ids: list[uuid.UUID]) -> list[_Entry]:
    """The entries of the reviews, each group's in group order, with who decided them."""
    rows = db.execute(_ENTRIES_STATEMENT, {"review_ids": review_ids}).mappings()
    return [
        _Entry(
            id=entry["id"],
            review_id=entry["review_id"],
            group=entry["group"],
            status=entry["status"],
            reviewed_by_id=entry["reviewed_by_id"],
            reviewed_by=None
            if entry["reviewer_id"] is None
            else ReviewOwnerPublic(
                id=entry["reviewer_id"],
                name=entry["reviewer_name"],
                email=entry["reviewer_email"],
                chat_id=entry["reviewer_chat_id"] or "",
            ),
            review_date=entry["review_date"],
            forced_review=entry["forced_review"],
        )
        for entry in rows
    ]


def _lock_review(db: Session, review_ref: str, actor: User) -> _Locked:
    """The review, locked until the transaction ends, with its entries in group order."""
    ref = _review_id(review_ref)
    locked = db.execute(_LOCK_STATEMENT, {"ref": ref, "organization_id": actor.organization_id})
    row = locked.mappings().first()
    if row is None:
        raise errors.NotFound(REVIEW_NOT_FOUND)
    review = dict(row)
    entries = _read_entries(db, [review["id"]])
    return _Locked(review, entries)


def _window_change(db: Session, review: dict[str, Any], request: ReviewDecisionRequest) -> bool:
    """Whether the approval sets the review's time window; Conflict if it would change one.

    The first window set is the one every later approver agreed to (or may refuse by
    rejecting), so nobody can widen it afterwards; and an APPROVED review's window never
    changes, as the approvals were given for it.
    """
    if request.time_window is None:
        return False
    wanted = request.time_window.model_dump()
    if wanted == review["time_window"]:
        return False
    if review["time_window"] is not None:
        set_by = review["time_window_set_by_id"]
        setter = None if set_by is None else db.get(User, set_by)
        window = review["time_window"]["configuration"]
        raise errors.Conflict(
            f"this review's time window ({window['start_time']}-{window['end_time']} UTC) was "
            f"set by {_who(setter)}; an approval may repeat it but not change it"
        )
    if review["status"] is not ReviewStatus.PENDING:
        raise errors.Conflict(
            f"this review is already {review['status']} without a time window; "
            "it cannot get one now"
        )
    return True


def _who(user: User | None) -> str:
    if user is None:
        return "an earlier approver"
    return user.name or user.email or user.sub


# The decision's writes, built once: a statement built per call costs more than running it.
_DECIDE_ENTRIES = (
    update(_entry_table)
    .where(
        _entry_table.c.review_id == bindparam("of_review"),
        _entry_table.c.group.in_(bindparam("groups", expanding=True)),
    )
    .values(
        status=bindparam("new_status"),
        reviewed_by_id=bindparam("actor_id"),
        review_date=bindparam("now"),
        forced_review=bindparam("forced"),
    )
)
_MIRROR_STATUS = (
    update(_entry_table)
    .where(_entry_table.c.review_id == bindparam("of_review"))
    .values(review_status=bindparam("new_status"))
)
_INSERT_DECISION = insert(table_of(ReviewDecisionRecord))


def _apply(
    db: Session,
    locked: _Locked,
    outcome: Outcome,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
) -> list[_Entry]:
    """Write the outcome; return the entries as they now are."""
    review = locked.review
    decided_by = ReviewOwnerPublic(
        id=actor.id, name=actor.name, email=actor.email, chat_id=actor.chat_id or ""
    )
    entries = [
        replace(
            entry,
            status=outcome.entries[entry.group],
            reviewed_by_id=actor.id,
            reviewed_by=decided_by,
            review_date=now,
            forced_review=outcome.forced,
        )
        if entry.group in outcome.entries
        else entry
        for entry in locked.entries
    ]
    for status in sorted(set(outcome.entries.values())):
        groups = [group for group, new in outcome.entries.items() if new is status]
        db.execute(
            _DECIDE_ENTRIES,
            {
                "of_review": review["id"],
                "groups": groups,
                "new_status": status,
                "actor_id": actor.id,
                "now": now,
                "forced": outcome.forced,
            },
        )
    changes: dict[str, Any] = {}
    if request.time_window is not None and review["time_window"] is None:
        changes["time_window"] = request.time_window.model_dump()
        changes["time_window_set_by_id"] = actor.id
    if outcome.status is not review["status"]:
        changes |= _entering(review, outcome.status, actor=actor, request=request, now=now)
        mirror_review_status(db, review["id"], outcome.status)
    if changes:
        db.execute(update(_review_table).where(_review_table.c.id == review["id"]).values(changes))
        review.update(changes)
    return entries


def mirror_review_status(db: Session, review_id: uuid.UUID, status: ReviewStatus) -> None:
    """Copy a review's new status onto its entries, which the reviewers' lists walk.

    Every change of a review's status calls it, in the transaction of the change.
    """
    db.execute(_MIRROR_STATUS, {"of_review": review_id, "new_status": status})


def _entering(
    review: dict[str, Any],
    status: ReviewStatus,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    now: datetime,
) -> dict[str, Any]:
    """The columns that change as the review enters ``status``."""
    changes: dict[str, Any] = {"status": status}
    if status is ReviewStatus.APPROVED and review["type"] is ReviewType.JIT:
        changes["revoke_at"] = now + timedelta(microseconds=review["access_duration"] // 1000)
    elif status in (ReviewStatus.REJECTED, ReviewStatus.REVOKED):
        changes["ended_by_id"] = actor.id
        changes["ended_at"] = now
        if status is ReviewStatus.REVOKED:
            changes["revoke_at"] = now
        else:
            changes["rejection_reason"] = request.rejection_reason
    return changes


def _record(
    db: Session,
    review: dict[str, Any],
    before: ReviewState,
    outcome: Outcome,
    *,
    actor: User,
    request: ReviewDecisionRequest,
    door: Door,
    now: datetime,
) -> None:
    db.execute(
        _INSERT_DECISION,
        {
            "id": new_id(),
            "review_id": review["id"],
            "actor_id": actor.id,
            "door": door,
            "decision": request.status,
            "forced": outcome.forced,
            "groups": sorted(outcome.entries),
            "status_before": before.status,
            "status_after": outcome.status,
            "created_at": now,
        },
    )
    record_review_event(
        db,
        kind=EventKind.REVIEW_UPDATED,
        review_id=review["id"],
        session_id=review["session_id"],
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
    DECISIONS.labels(door.value, outcome.status.value).inc()
    told = _FINAL_KINDS.get(outcome.status)
    if told is not None and outcome.status is not before.status:
        publish_event(
            db,
            kind=told,
            organization_id=review["organization_id"],
            review_id=review["id"],
            now=now,
            data={
                **event_review(review),
                "status_before": before.status.value,
                "actor": {"id": str(actor.id), "email": actor.email, "name": actor.name},
                "door": door.value,
                "groups": sorted(outcome.entries),
                "forced": outcome.forced,
            },
        )
    record_audit(
        db,
        kind=AuditKind.REVIEW_DECIDED,
        actor=actor,
        door=door.value,
        target=f"review:{review['id']}",
        review_id=review["id"],
        now=now,
        details={
            "decision": request.status.value,
            "groups": sorted(outcome.entries),
            "forced": outcome.forced,
            "status_before": before.status.value,
            "status_after": outcome.status.value,
            "reason": request.rejection_reason,
        },
    )


_FINAL_KINDS = {
    ReviewStatus.APPROVED: WebhookKind.REVIEW_APPROVED,
    ReviewStatus.REJECTED: WebhookKind.REVIEW_REJECTED,
    ReviewStatus.REVOKED: WebhookKind.REVIEW_REVOKED,
}


def event_review(review: Mapping[str, Any] | Review) -> dict[str, Any]:
    """What every review event tells of the review as it now is (version 1 of the payload)."""

    if isinstance(review, Review):
        review = {name: getattr(review, name) for name in Review.model_fields}

    def moment(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "review_id": str(review["id"]),
        "session_id": str(review["session_id"]),
        "connection": review["connection_name"],
        "type": review["type"].value,
        "status": review["status"].value,
        "requester_id": str(review["owner_id"]),
        "reason": review["reason"],
        "rejection_reason": review["rejection_reason"],
        "revoke_at": moment(review["revoke_at"]),
        "expires_at": moment(review["expires_at"]),
    }


# -- expiry -----------------------------------------------------------------------------------


def is_past_deadline(review: Mapping[str, Any], now: datetime) -> bool:
    """A PENDING review whose deadline has come: nobody may decide it any more."""
    deadline = review["expires_at"]
    return review["status"] is ReviewStatus.PENDING and deadline is not None and deadline <= now


def expire_review(db: Session, review: dict[str, Any], *, now: datetime) -> None:
    """Reject the locked, PENDING ``review`` as expired, by the system; ``review`` is updated.

    Its entries keep their statuses (nobody decided them); the decision is recorded with no
    actor through the ``system`` door, and its event rewrites the cards and tells the
    requester like any rejection.
    """
    waited = in_words(review["expires_at"] - review["created_at"])
    changes = {
        "status": ReviewStatus.REJECTED,
        "rejection_reason": f"expired: nobody decided within {waited}",
        "ended_at": now,
        "ended_by_id": None,
        "next_reminder_at": None,
    }
    db.execute(update(_review_table).where(_review_table.c.id == review["id"]).values(changes))
    review.update(changes)
    mirror_review_status(db, review["id"], ReviewStatus.REJECTED)
    db.execute(
        _INSERT_DECISION,
        {
            "id": new_id(),
            "review_id": review["id"],
            "actor_id": None,
            "door": Door.SYSTEM,
            "decision": Decision.REJECTED,
            "forced": False,
            "groups": [],
            "status_before": ReviewStatus.PENDING,
            "status_after": ReviewStatus.REJECTED,
            "created_at": now,
        },
    )
    record_review_event(
        db,
        kind=EventKind.REVIEW_UPDATED,
        review_id=review["id"],
        session_id=review["session_id"],
        status=ReviewStatus.REJECTED.value,
        now=now,
        details={
            "status_before": ReviewStatus.PENDING.value,
            "decision": Decision.REJECTED.value,
            "groups": [],
            "actor_id": None,
            "door": Door.SYSTEM.value,
            "expired": True,
        },
    )
    DECISIONS.labels(Door.SYSTEM.value, ReviewStatus.REJECTED.value).inc()
    publish_event(
        db,
        kind=WebhookKind.REVIEW_EXPIRED,
        organization_id=review["organization_id"],
        review_id=review["id"],
        now=now,
        data={**event_review(review), "status_before": ReviewStatus.PENDING.value},
    )
    record_audit(
        db,
        kind=AuditKind.REVIEW_EXPIRED,
        actor=None,
        actor_name=SYSTEM_ACTOR,
        organization_id=review["organization_id"],
        door=Door.SYSTEM.value,
        target=f"review:{review['id']}",
        review_id=review["id"],
        now=now,
        details={
            "status_after": ReviewStatus.REJECTED.value,
            "reason": changes["rejection_reason"],
        },
    )


# -- reading ----------------------------------------------------------------------------------


def _review_id(review_ref: str) -> uuid.UUID:
    """``review_ref`` (a review's id or its session's) as a uuid; NotFound if it is none."""
    try:
        return uuid.UUID(review_ref)
    except ValueError as exc:
        raise errors.NotFound(REVIEW_NOT_FOUND) from exc


def _named_by(review_ref: str) -> ColumnElement[bool]:
    """The review whose id, or whose session's id, is ``review_ref``."""
    ref = _review_id(review_ref)
    return or_(col(Review.id) == ref, col(Review.session_id) == ref)


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


def review_views(db: Session, reviews: Sequence[Review]) -> list[ReviewPublic]:
    """Render reviews with their entries and reviewers, in one query whatever their number."""
    return review_views_of(db, [{name: getattr(r, name) for name in VIEW_COLUMNS} for r in reviews])


def review_views_of(db: Session, reviews: Sequence[Mapping[str, Any]]) -> list[ReviewPublic]:
    """``review_views`` for reviews read as rows (lists read them so: no ORM objects to make)."""
    if not reviews:
        return []
    views: dict[uuid.UUID, list[ReviewGroupPublic]] = {review["id"]: [] for review in reviews}
    for entry in _read_entries(db, list(views)):
        views[entry.review_id].append(entry.view())
    return [_review_view(review, views[review["id"]]) for review in reviews]


VIEW_COLUMNS = (  # what a review shows of its row
    "id",
    "session_id",
    "type",
    "status",
    "min_approvals",
    "force_approval_groups",
    "time_window",
    "access_duration",
    "access_request_rule_name",
    "rejection_reason",
    "created_at",
    "revoke_at",
    "listener_name",
    "sidecar_id",
    "reason",
    "expires_at",
)


def _review_view(review: Mapping[str, Any], entries: list[ReviewGroupPublic]) -> ReviewPublic:
    return ReviewPublic(
        id=review["id"],
        session=review["session_id"],
        type=review["type"],
        status=review["status"],
        review_groups_data=entries,
        min_approvals=review["min_approvals"],
        force_approval_groups=review["force_approval_groups"],
        time_window=None if review["time_window"] is None else TimeWindow(**review["time_window"]),
        access_duration=review["access_duration"],
        access_request_rule_name=review["access_request_rule_name"],
        rejection_reason=review["rejection_reason"],
        created_at=review["created_at"],
        revoke_at=review["revoke_at"],
        listener_name=review["listener_name"],
        sidecar_id=review["sidecar_id"],
        reason=review["reason"],
        expires_at=review["expires_at"],
    )


__all__ = [
    "Decision",
    "decision_history",
    "decisions_open_to",
    "event_review",
    "expire_review",
    "get_review",
    "is_past_deadline",
    "mirror_review_status",
    "review_views",
    "update_review",
]
