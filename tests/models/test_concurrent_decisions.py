"""Simultaneous decisions on one review are serialized by the database and lose nothing."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import select

from models.clock import utc_now
from models.connection_service import create_connection
from models.connections import ConnectionCreate
from models.db import session_scope
from models.outbox import EventKind, OutboxEvent
from models.review_machine import Decision, ReviewStatus
from models.review_service import get_review, update_review
from models.reviews import ReviewDecisionRecord, ReviewDecisionRequest
from models.rule_service import create_rule
from models.rules import AccessRequestRuleIn
from models.session_service import open_session
from models.sessions import SessionCreate
from models.user_service import upsert_user

REVIEWERS = 32

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def test_32_reviewers_approving_at_once_all_count_and_approve_once(engine):
    groups = [f"group-{number:02d}" for number in range(REVIEWERS)]
    with session_scope(engine) as session:
        admin = upsert_user(session=session, sub="admin", groups=["admin"])
        owner = upsert_user(session=session, sub="owner", groups=["dev"])
        reviewers = [
            upsert_user(session=session, sub=f"reviewer-{group}", groups=[group])
            for group in groups
        ]
        create_connection(
            session=session, actor=admin, request=ConnectionCreate(name="db", type="database")
        )
        create_rule(
            session=session,
            actor=admin,
            request=AccessRequestRuleIn(name="all", connections=["db"], approval_groups=groups),
        )
        review_id = str(
            open_session(
                session=session,
                owner=owner,
                request=SessionCreate(connection="db"),
                now=utc_now(),
            ).review.id  # type: ignore[union-attr]
        )

    start = threading.Barrier(REVIEWERS)

    def approve(reviewer):
        with session_scope(engine) as session:
            start.wait()
            return update_review(
                session=session,
                review_ref=review_id,
                actor=reviewer,
                request=ReviewDecisionRequest(status=Decision.APPROVED),
                now=utc_now(),
            ).status

    with ThreadPoolExecutor(max_workers=REVIEWERS) as pool:
        seen = list(pool.map(approve, reviewers))

    assert seen.count(ReviewStatus.APPROVED) == 1, "only the last decision completes the review"
    with session_scope(engine) as session:
        review = get_review(session=session, review_ref=review_id, viewer=admin)
        decisions = session.exec(select(ReviewDecisionRecord)).all()
        events = session.exec(
            select(OutboxEvent).where(OutboxEvent.kind == EventKind.REVIEW_UPDATED)
        ).all()
    assert review.status is ReviewStatus.APPROVED
    assert {entry.status for entry in review.review_groups_data} == {ReviewStatus.APPROVED}
    reviewed_by = {entry.reviewed_by.id for entry in review.review_groups_data if entry.reviewed_by}
    assert reviewed_by == {reviewer.id for reviewer in reviewers}
    assert len(decisions) == REVIEWERS
    approvals = [d for d in decisions if d.status_after is ReviewStatus.APPROVED]
    assert len(approvals) == 1
    assert approvals[0].status_before is ReviewStatus.PENDING
    assert len(events) == REVIEWERS
    assert [e.payload["status"] for e in events].count("APPROVED") == 1
