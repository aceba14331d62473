"""The review state machine of spec section 3, as data plus one pure function.

Overall status of a review::

                 all required groups approve            owner/admin
    PENDING ───────────────────────────────► APPROVED ──────────────► REVOKED
       │  ▲ force-approval also jumps here       │
       │  └──── (remaining groups may still      │ owner/admin
       │         approve while APPROVED)         ▼
       └──────────── any reviewer rejects ───► REJECTED

    APPROVED ──(session executed)──► PROCESSING ──► EXECUTED | UNKNOWN

REJECTED, REVOKED, PROCESSING, EXECUTED and UNKNOWN accept no decision. Each reviewer group has
an entry that starts PENDING; a decision updates every entry whose group the reviewer belongs to.
"""

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, time
from enum import Enum, StrEnum

from models.core import errors


class ReviewStatus(StrEnum):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    REVOKED = "REVOKED"
    PROCESSING = "PROCESSING"
    EXECUTED = "EXECUTED"
    UNKNOWN = "UNKNOWN"

    @property
    def word(self) -> str:
        """The status as people read it on a card or a page."""
        return "running" if self is ReviewStatus.PROCESSING else self.value.lower()


class Decision(StrEnum):
    """What a reviewer may ask for (spec 2.1)."""

    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    REVOKED = "REVOKED"


class Allowed(Enum):
    """Who may make a decision from a given overall status."""

    REVIEWERS = "a member of a reviewer group who is not the owner (admins excepted)"
    REVIEWERS_OWNER_OR_ADMIN = "a member of a reviewer group, the owner or an admin"
    OWNER_OR_ADMIN = "the owner of the review or an admin"


TRANSITIONS: dict[tuple[ReviewStatus, Decision], Allowed] = {
    (ReviewStatus.PENDING, Decision.APPROVED): Allowed.REVIEWERS,
    # With min_approvals below the number of groups a review is APPROVED while some entries are
    # still PENDING; their groups may still record their approval.
    (ReviewStatus.APPROVED, Decision.APPROVED): Allowed.REVIEWERS,
    (ReviewStatus.PENDING, Decision.REJECTED): Allowed.REVIEWERS_OWNER_OR_ADMIN,
    (ReviewStatus.APPROVED, Decision.REJECTED): Allowed.OWNER_OR_ADMIN,
    (ReviewStatus.APPROVED, Decision.REVOKED): Allowed.OWNER_OR_ADMIN,
}

OPEN_STATUSES = frozenset({ReviewStatus.PENDING, ReviewStatus.APPROVED})


@dataclass(frozen=True)
class Reviewer:
    """The person deciding, as the state machine needs to see them."""

    id: uuid.UUID
    groups: frozenset[str]
    is_admin: bool


@dataclass(frozen=True)
class ReviewState:
    """What the state machine needs to know of a review."""

    status: ReviewStatus
    owner_id: uuid.UUID
    entries: dict[str, ReviewStatus]
    """Status of each reviewer group's entry, by group name."""
    force_approval_groups: frozenset[str]
    min_approvals: int | None
    approved_by: frozenset[uuid.UUID] = frozenset()
    """Who approved the entries approved so far."""
    distinct_approvers: bool = False
    """A rule's policy: one person's approval satisfies one group only."""
    no_self_force_approval: bool = False
    """A rule's policy: nobody force-approves their own session, admins included."""

    @property
    def required_approvals(self) -> int:
        if self.min_approvals is None:
            return len(self.entries)
        return min(len(self.entries), self.min_approvals)


@dataclass(frozen=True)
class Outcome:
    """What a decision changes. Empty ``entries`` and an unchanged status mean a no-op."""

    status: ReviewStatus
    entries: dict[str, ReviewStatus]
    """The entries to rewrite, by group name, with their new status."""
    forced: bool

    def changes(self, before: ReviewState) -> bool:
        return bool(self.entries) or self.status != before.status


def decide(state: ReviewState, reviewer: Reviewer, decision: Decision, *, force: bool) -> Outcome:
    """Apply ``decision`` by ``reviewer`` to ``state``; return what changes or raise why not."""
    if state.status not in OPEN_STATUSES:
        raise errors.ReviewClosed(f"this review is {state.status} and accepts no further decisions")
    allowed = TRANSITIONS.get((state.status, decision))
    if allowed is None:
        raise errors.InvalidRequest(f"a {state.status} review cannot be {decision}")
    if force and decision is not Decision.APPROVED:
        raise errors.InvalidRequest("force_review is only accepted with status APPROVED")

    is_owner = reviewer.id == state.owner_id
    own_groups = [group for group in state.entries if group in reviewer.groups]
    _check_allowed(allowed, state, reviewer, is_owner=is_owner, own_groups=own_groups, force=force)

    if decision is Decision.APPROVED:
        if state.distinct_approvers and not force:
            # One person, one group: the first of theirs still pending, unless they approved
            # for another group already.
            pending = [g for g in own_groups if state.entries[g] is ReviewStatus.PENDING]
            own_groups = [] if reviewer.id in state.approved_by else pending[:1]
        return _approve(state, own_groups, force=force)
    final = ReviewStatus(decision.value)
    return Outcome(
        status=final,
        entries={group: final for group in own_groups if state.entries[group] != final},
        forced=False,
    )


def _check_allowed(
    allowed: Allowed,
    state: ReviewState,
    reviewer: Reviewer,
    *,
    is_owner: bool,
    own_groups: list[str],
    force: bool,
) -> None:
    if allowed is Allowed.OWNER_OR_ADMIN:
        if not (is_owner or reviewer.is_admin):
            raise errors.OwnerOrAdminRequired(
                "only the owner of the review or an admin can end an approved review"
            )
        return
    if allowed is Allowed.REVIEWERS_OWNER_OR_ADMIN and (is_owner or reviewer.is_admin):
        return
    if is_owner and force and state.no_self_force_approval:
        raise errors.SelfApproval(
            "this review's rule forbids force-approving your own session, admins included"
        )
    if is_owner and not reviewer.is_admin:
        raise errors.SelfApproval(
            "you cannot approve your own session; another member of a reviewer group must"
        )
    if force:
        if not (reviewer.is_admin or reviewer.groups & state.force_approval_groups):
            raise errors.NotForceApprover(
                "force approval needs membership of a force-approval group of this review: "
                + (", ".join(sorted(state.force_approval_groups)) or "none is configured")
            )
        return
    if not own_groups:
        raise errors.NotAReviewer(
            "you are not in any reviewer group of this review: " + ", ".join(sorted(state.entries))
        )


def _approve(state: ReviewState, own_groups: list[str], *, force: bool) -> Outcome:
    newly_approved = {
        group: ReviewStatus.APPROVED
        for group in own_groups
        if state.entries[group] is ReviewStatus.PENDING
    }
    approved_count = sum(
        1
        for group, status in state.entries.items()
        if status is ReviewStatus.APPROVED or group in newly_approved
    )
    enough = force or approved_count >= state.required_approvals
    status = ReviewStatus.APPROVED if enough else state.status
    return Outcome(status=status, entries=newly_approved, forced=force)


# -- time windows -----------------------------------------------------------------------------

# [0-9], not \d, which also matches other scripts' digits; fullmatch, so no trailing newline.
CLOCK_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")


def parse_clock_time(value: str) -> time:
    """Parse a 24-hour ``HH:MM`` clock time, or raise ValueError."""
    match = CLOCK_TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a 24-hour HH:MM time")
    return time(int(match.group(1)), int(match.group(2)))


def within_time_window(start: time, end: time, moment: datetime) -> bool:
    """Whether ``moment`` (UTC) falls in [start, end); windows may cross midnight."""
    now = moment.time().replace(second=0, microsecond=0, tzinfo=None)
    if start < end:
        return start <= now < end
    return now >= start or now < end
