"""The scheduler's rules with frozen time: expiry, reminders, digests and ended JIT access.

Reviews are filed and decided through the API, the rules run at chosen instants, and what a
user would notice is checked: the review's status and reason, the recorded decision, the outbox
events that tell Slack, and that nothing fires twice, even with replicas claiming at once.
"""

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from sqlmodel import col, select, update

from models.core.db import db_scope, write_transaction
from models.core.settings import Settings
from models.delivery.outbox import EventKind, OutboxEvent
from models.reviews.schema import Door, Review, ReviewDecisionRecord
from models.reviews.timing import ReviewTiming
from models.scheduler.rules import expire_due, run_due_rules
from models.users.schema import User
from tests.factories import (
    TEST_SECRET_KEY,
    configure_review_groups,
    decide,
    make_connection,
    make_user,
    open_session,
)

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

FILED = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
TIMING = ReviewTiming(
    expires_after=timedelta(hours=1), remind_after=timedelta(minutes=10), reminders=2
)


@pytest.fixture
def settings(database_url, tmp_path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        secret_key=TEST_SECRET_KEY,
        review_expires_after=TIMING.expires_after,
        review_remind_after=TIMING.remind_after,
        review_reminders=TIMING.reminders,
        # The rules run when the tests say, not on the app's own schedule.
        scheduler_interval_seconds=3600,
    )


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"]),
        "owner": make_user(engine, "olivia", ["dev"]),
        "dba": make_user(engine, "dana", ["dba"]),
        "sre": make_user(engine, "sam", ["sre"]),
    }


@pytest.fixture
def file_review(client, people):
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba", "sre"])

    def file(at: datetime = FILED, **fields):
        with freeze_time(at):
            return open_session(client, people["owner"], **fields)["review"]

    return file


def run_at(engine, moment: datetime):
    with freeze_time(moment), db_scope(engine) as db:
        return run_due_rules(db, now=moment, timing=TIMING)


def events(engine, kind: EventKind) -> list[OutboxEvent]:
    with db_scope(engine) as db:
        return list(
            db.exec(
                select(OutboxEvent).where(OutboxEvent.kind == kind).order_by(col(OutboxEvent.id))
            )
        )


def stored(engine, review_id: str) -> Review:
    with db_scope(engine) as db:
        return db.exec(select(Review).where(col(Review.id) == uuid.UUID(review_id))).one()


# -- expiry -------------------------------------------------------------------------------------


def test_a_review_shows_its_deadline(file_review):
    review = file_review()

    assert review["expires_at"] == "2026-11-23T10:00:00Z"


def test_a_pending_review_expires_at_its_deadline_once(engine, file_review, client, people):
    review = file_review()

    assert run_at(engine, FILED + timedelta(minutes=59, seconds=59)).expired == 0
    assert run_at(engine, FILED + timedelta(hours=1)).expired == 1
    assert run_at(engine, FILED + timedelta(hours=2)).expired == 0

    shown = client.get(f"/api/reviews/{review['id']}", headers=people["owner"].headers).json()
    assert shown["status"] == "REJECTED"
    assert shown["rejection_reason"] == "expired: nobody decided within 1 hour"
    with db_scope(engine) as db:
        record = db.exec(select(ReviewDecisionRecord)).one()
    assert record.door is Door.SYSTEM
    assert record.actor_id is None
    [event] = [
        e for e in events(engine, EventKind.REVIEW_UPDATED) if e.payload.get("door") == "system"
    ]
    assert event.payload["status"] == "REJECTED"
    assert event.payload["expired"] is True


def test_a_decision_after_expiry_is_refused(engine, file_review, client, people):
    review = file_review()
    run_at(engine, FILED + timedelta(hours=1))

    with freeze_time(FILED + timedelta(hours=1, minutes=1)):
        answer = decide(client, people["dba"], review["id"], status="APPROVED")

    assert answer.status_code == 400
    assert "REJECTED and accepts no further decisions" in answer.json()["message"]


def test_a_decision_past_the_deadline_expires_the_review_even_before_the_scheduler_runs(
    engine, file_review, client, people
):
    review = file_review()

    with freeze_time(FILED + timedelta(hours=1, seconds=1)):
        answer = decide(client, people["dba"], review["id"], status="APPROVED")

    assert answer.status_code == 400
    assert "it expired at 2026-11-23T10:00:00+00:00" in answer.json()["message"]
    assert stored(engine, review["id"]).status == "REJECTED"
    assert run_at(engine, FILED + timedelta(hours=2)).expired == 0  # already done, once


def test_a_decided_review_does_not_expire(engine, file_review, client, people):
    review = file_review()
    with freeze_time(FILED + timedelta(minutes=5)):
        decide(client, people["dba"], review["id"], status="REJECTED")

    assert run_at(engine, FILED + timedelta(hours=1)).expired == 0
    assert stored(engine, review["id"]).rejection_reason is None


def test_replicas_running_expiry_at_once_expire_each_review_exactly_once(engine, file_review):
    filed = [file_review(FILED + timedelta(seconds=n))["id"] for n in range(60)]
    moment = FILED + timedelta(hours=2)
    counts: list[int] = []

    def replica() -> None:
        total = 0
        with db_scope(engine) as db:
            while fired := expire_due(db, now=moment, timing=TIMING):
                total += fired
        counts.append(total)

    threads = [threading.Thread(target=replica) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(counts) == 60
    with db_scope(engine) as db:
        assert len(db.exec(select(ReviewDecisionRecord)).all()) == 60
        ids = [uuid.UUID(review_id) for review_id in filed]
        statuses = db.exec(select(Review.status).where(col(Review.id).in_(ids))).all()
    assert set(statuses) == {"REJECTED"}
    expired = [
        e for e in events(engine, EventKind.REVIEW_UPDATED) if e.payload.get("door") == "system"
    ]
    assert sorted(e.payload["review_id"] for e in expired) == sorted(filed)


def test_with_expiry_off_a_review_has_no_deadline(engine, client, people, settings):
    settings.review_expires_after = timedelta(0)  # the app reads its settings per request
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba"])

    review = open_session(client, people["owner"])["review"]

    assert review["expires_at"] is None


# -- reminders ----------------------------------------------------------------------------------


def test_reminders_name_the_groups_still_undecided_and_stop_at_the_limit(
    engine, file_review, client, people
):
    review = file_review()

    assert run_at(engine, FILED + timedelta(minutes=9)).reminded == 0
    assert run_at(engine, FILED + timedelta(minutes=10)).reminded == 1
    with freeze_time(FILED + timedelta(minutes=15)):
        decide(client, people["dba"], review["id"], status="APPROVED")
    assert run_at(engine, FILED + timedelta(minutes=19)).reminded == 0
    assert run_at(engine, FILED + timedelta(minutes=20)).reminded == 1
    assert run_at(engine, FILED + timedelta(minutes=59)).reminded == 0  # two at most

    first, second = events(engine, EventKind.REVIEW_REMINDER)
    assert (first.payload["reminder"], first.payload["groups"]) == (1, ["dba", "sre"])
    assert (second.payload["reminder"], second.payload["groups"]) == (2, ["sre"])
    assert stored(engine, review["id"]).reminders_sent == 2


def test_a_decided_review_is_not_reminded(engine, file_review, client, people):
    review = file_review()
    with freeze_time(FILED + timedelta(minutes=5)):
        decide(client, people["dba"], review["id"], status="REJECTED")

    assert run_at(engine, FILED + timedelta(minutes=30)).reminded == 0


def test_a_reviewer_who_takes_reminders_by_dm_gets_one_digest_an_interval(
    engine, file_review, people
):
    with db_scope(engine) as db, write_transaction(db):
        db.execute(
            update(User)
            .where(col(User.id) == people["dba"].id)
            .values(chat_id="U0DANA", reminders_by_dm=True)
        )
    file_review(FILED)
    file_review(FILED + timedelta(seconds=30))
    file_review(FILED + timedelta(minutes=5))

    at_ten = run_at(engine, FILED + timedelta(minutes=10, seconds=30))
    at_fifteen = run_at(engine, FILED + timedelta(minutes=15))
    at_twenty = run_at(engine, FILED + timedelta(minutes=20, seconds=30))

    assert (at_ten.reminded, at_ten.digests) == (2, 1)  # two reviews, one digest
    assert (at_fifteen.reminded, at_fifteen.digests) == (1, 0)  # too soon for another
    assert (at_twenty.reminded, at_twenty.digests) == (2, 1)
    digests = events(engine, EventKind.REMINDER_DIGEST)
    assert [d.payload["user_id"] for d in digests] == [str(people["dba"].id)] * 2


# -- JIT access that ends -----------------------------------------------------------------------


def test_the_end_of_jit_access_is_told_once(engine, file_review, client, people):
    review = file_review(type="jit", access_duration=30 * 60 * 1_000_000_000)
    for reviewer in ("dba", "sre"):
        with freeze_time(FILED + timedelta(minutes=1)):
            decide(client, people[reviewer], review["id"], status="APPROVED")

    assert run_at(engine, FILED + timedelta(minutes=30)).access_ended == 0
    assert run_at(engine, FILED + timedelta(minutes=31)).access_ended == 1
    assert run_at(engine, FILED + timedelta(minutes=45)).access_ended == 0

    [ended] = events(engine, EventKind.REVIEW_ACCESS_ENDED)
    assert ended.payload["review_id"] == review["id"]
    assert stored(engine, review["id"]).access_end_told is True


def test_revoked_access_is_not_told_to_end_again(engine, file_review, client, people):
    review = file_review(type="jit")
    for reviewer in ("dba", "sre"):
        with freeze_time(FILED + timedelta(minutes=1)):
            decide(client, people[reviewer], review["id"], status="APPROVED")
    with freeze_time(FILED + timedelta(minutes=2)):
        decide(client, people["owner"], review["id"], status="REVOKED")

    assert run_at(engine, FILED + timedelta(hours=3)).access_ended == 0
