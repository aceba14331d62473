"""Simultaneous decisions on one review are serialized by the database and lose nothing."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import select

from models.connections.schema import ConnectionCreate
from models.connections.service import create_connection
from models.core.clock import utc_now
from models.core.db import db_scope
from models.delivery.outbox import EventKind, OutboxEvent
from models.reviews.machine import Decision, ReviewStatus
from models.reviews.schema import ReviewDecisionRecord, ReviewDecisionRequest
from models.reviews.service import get_review, update_review
from models.rules.schema import AccessRequestRuleIn
from models.rules.service import create_rule
from models.sessions.schema import SessionCreate
from models.sessions.service import open_session
from models.users.service import upsert_user

REVIEWERS = 32

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def test_32_reviewers_approving_at_once_all_count_and_approve_once(engine):
    groups = [f"group-{number:02d}" for number in range(REVIEWERS)]
    with db_scope(engine) as db:
        admin = upsert_user(db=db, sub="admin", groups=["admin"])
        owner = upsert_user(db=db, sub="owner", groups=["dev"])
        reviewers = [
            upsert_user(db=db, sub=f"reviewer-{group}", groups=[group]) for group in groups
        ]
        create_connection(db=db, actor=admin, request=ConnectionCreate(name="db", type="database"))
        create_rule(
            db=db,
            actor=admin,
            request=AccessRequestRuleIn(name="all", connections=["db"], approval_groups=groups),
        )
        review_id = str(
            open_session(
                db=db,
                owner=owner,
                request=SessionCreate(connection="db"),
                now=utc_now(),
            ).review.id  # type: ignore[union-attr]
        )

    start = threading.Barrier(REVIEWERS)

    def approve(reviewer):
        with db_scope(engine) as db:
            start.wait()
            return update_review(
                db=db,
                review_ref=review_id,
                actor=reviewer,
                request=ReviewDecisionRequest(status=Decision.APPROVED),
                now=utc_now(),
            ).status

    with ThreadPoolExecutor(max_workers=REVIEWERS) as pool:
        seen = list(pool.map(approve, reviewers))

    assert seen.count(ReviewStatus.APPROVED) == 1, "only the last decision completes the review"
    with db_scope(engine) as db:
        review = get_review(db=db, review_ref=review_id, viewer=admin)
        decisions = db.exec(select(ReviewDecisionRecord)).all()
        events = db.exec(
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
