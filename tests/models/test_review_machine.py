"""The state machine alone: every rule of spec section 3, table-driven."""

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.core import errors
from models.reviews.machine import (
    Decision,
    Reviewer,
    ReviewState,
    ReviewStatus,
    decide,
    parse_clock_time,
    within_time_window,
)

OWNER = uuid.uuid4()
P, A, R, V = (
    ReviewStatus.PENDING,
    ReviewStatus.APPROVED,
    ReviewStatus.REJECTED,
    ReviewStatus.REVOKED,
)


def state(
    status: ReviewStatus = P,
    entries: dict[str, ReviewStatus] | None = None,
    *,
    force_groups: tuple[str, ...] = (),
    min_approvals: int | None = None,
) -> ReviewState:
    return ReviewState(
        status=status,
        owner_id=OWNER,
        entries=entries if entries is not None else {"dba": P, "sre": P},
        force_approval_groups=frozenset(force_groups),
        min_approvals=min_approvals,
    )


def person(*groups: str, owner: bool = False) -> Reviewer:
    return Reviewer(
        id=OWNER if owner else uuid.uuid4(), groups=frozenset(groups), is_admin="admin" in groups
    )


@pytest.mark.parametrize(
    ("before", "who", "decision", "status_after", "entries_after"),
    [
        # one group of two approves: still pending
        (state(), person("dba"), Decision.APPROVED, P, {"dba": A}),
        # a member of both groups approves both entries at once (rule 3.3.4)
        (state(), person("dba", "sre"), Decision.APPROVED, A, {"dba": A, "sre": A}),
        # the last group approves
        (state(P, {"dba": A, "sre": P}), person("sre"), Decision.APPROVED, A, {"sre": A}),
        # min_approvals lower than the number of groups
        (state(min_approvals=1), person("sre"), Decision.APPROVED, A, {"sre": A}),
        # min_approvals above the number of groups is capped at the number of groups
        (state(min_approvals=5), person("dba", "sre"), Decision.APPROVED, A, {"dba": A, "sre": A}),
        # a remaining group may still approve an approved review
        (
            state(A, {"dba": A, "sre": P}, min_approvals=1),
            person("sre"),
            Decision.APPROVED,
            A,
            {"sre": A},
        ),
        # approving again is a harmless no-op
        (state(P, {"dba": A, "sre": P}), person("dba"), Decision.APPROVED, P, {}),
        # any rejection rejects the whole review at once
        (state(P, {"dba": A, "sre": P}), person("sre"), Decision.REJECTED, R, {"sre": R}),
        # the owner may withdraw a pending review
        (state(), person("dev", owner=True), Decision.REJECTED, R, {}),
        # an admin outside the groups may reject
        (state(), person("admin"), Decision.REJECTED, R, {}),
        # an approved review is ended by its owner or an admin
        (state(A, {"dba": A, "sre": A}), person("dev", owner=True), Decision.REVOKED, V, {}),
        (state(A, {"dba": A, "sre": A}), person("admin", "dba"), Decision.REVOKED, V, {"dba": V}),
        (state(A, {"dba": A, "sre": A}), person("admin"), Decision.REJECTED, R, {}),
        # an admin may approve even their own session
        (
            state(),
            person("admin", "dba", "sre", owner=True),
            Decision.APPROVED,
            A,
            {"dba": A, "sre": A},
        ),
    ],
)
def test_decisions_that_apply(before, who, decision, status_after, entries_after):
    outcome = decide(before, who, decision, force=False)

    assert outcome.status is status_after
    assert outcome.entries == entries_after


@pytest.mark.parametrize(
    ("before", "who", "decision", "error"),
    [
        (state(), person("dba", owner=True), Decision.APPROVED, errors.SelfApproval),
        (state(), person("web"), Decision.APPROVED, errors.NotAReviewer),
        (state(), person("web"), Decision.REJECTED, errors.NotAReviewer),
        (state(), person("admin"), Decision.APPROVED, errors.NotAReviewer),
        (
            state(A, {"dba": A, "sre": A}),
            person("dba"),
            Decision.REVOKED,
            errors.OwnerOrAdminRequired,
        ),
        (
            state(A, {"dba": A, "sre": A}),
            person("sre"),
            Decision.REJECTED,
            errors.OwnerOrAdminRequired,
        ),
        (state(), person("dba", owner=True), Decision.REVOKED, errors.InvalidRequest),
        (state(), person("admin"), Decision.REVOKED, errors.InvalidRequest),
        *[
            (
                state(closed, {"dba": P, "sre": P}),
                person("admin", "dba"),
                decision,
                errors.ReviewClosed,
            )
            for closed in (
                R,
                V,
                ReviewStatus.PROCESSING,
                ReviewStatus.EXECUTED,
                ReviewStatus.UNKNOWN,
            )
            for decision in Decision
        ],
    ],
)
def test_decisions_that_are_refused(before, who, decision, error):
    with pytest.raises(error):
        decide(before, who, decision, force=False)


def test_force_approval_approves_at_once_and_marks_the_forcing_entries():
    before = state(force_groups=("oncall",), entries={"dba": P, "oncall": P, "sre": P})

    outcome = decide(before, person("oncall"), Decision.APPROVED, force=True)

    assert outcome.status is A
    assert outcome.entries == {"oncall": A}
    assert outcome.forced


def test_force_approval_needs_a_force_approval_group():
    with pytest.raises(errors.NotForceApprover):
        decide(state(force_groups=("oncall",)), person("dba"), Decision.APPROVED, force=True)


def test_force_is_refused_with_anything_but_approval():
    with pytest.raises(errors.InvalidRequest):
        decide(state(force_groups=("oncall",)), person("oncall"), Decision.REJECTED, force=True)


def test_owner_cannot_force_approve_own_session():
    with pytest.raises(errors.SelfApproval):
        decide(
            state(force_groups=("oncall",)),
            person("oncall", owner=True),
            Decision.APPROVED,
            force=True,
        )


@given(
    groups=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, unique=True),
    min_approvals=st.none() | st.integers(min_value=1, max_value=6),
    approvers=st.lists(st.frozensets(st.sampled_from(["a", "b", "c", "d", "e", "x"])), max_size=8),
)
def test_a_review_is_approved_exactly_when_enough_groups_have_approved(
    groups, min_approvals, approvers
):
    current = state(entries=dict.fromkeys(groups, P), min_approvals=min_approvals)
    for approver_groups in approvers:
        try:
            outcome = decide(
                current,
                Reviewer(uuid.uuid4(), approver_groups, False),
                Decision.APPROVED,
                force=False,
            )
        except errors.NotAReviewer:
            assert not approver_groups & set(groups)
            continue
        entries = {**current.entries, **outcome.entries}
        approved = sum(1 for status in entries.values() if status is A)
        required = len(groups) if min_approvals is None else min(len(groups), min_approvals)
        assert (outcome.status is A) == (approved >= required)
        current = ReviewState(outcome.status, OWNER, entries, frozenset(), min_approvals)


@pytest.mark.parametrize(
    ("start", "end", "clock", "inside"),
    [
        ("09:00", "17:00", "09:00", True),
        ("09:00", "17:00", "16:59", True),
        ("09:00", "17:00", "17:00", False),
        ("09:00", "17:00", "08:59", False),
        ("22:00", "06:00", "23:30", True),
        ("22:00", "06:00", "00:00", True),
        ("22:00", "06:00", "05:59", True),
        ("22:00", "06:00", "06:00", False),
        ("22:00", "06:00", "12:00", False),
    ],
)
def test_time_windows_including_ones_that_cross_midnight(start, end, clock, inside):
    hour, minute = map(int, clock.split(":"))
    moment = datetime(2026, 11, 22, hour, minute, 30, tzinfo=UTC)

    assert within_time_window(parse_clock_time(start), parse_clock_time(end), moment) is inside


@pytest.mark.parametrize(
    "text", ["24:00", "9:00", "09:60", "0900", "09:00:00", "", "ab:cd", "17:00\n", "0\u0669:00"]
)
def test_clock_times_must_be_24_hour_hh_mm(text):
    with pytest.raises(ValueError, match="HH:MM"):
        parse_clock_time(text)
