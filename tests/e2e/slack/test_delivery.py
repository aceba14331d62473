"""Delivery when the queue outlives a lease: every review gets exactly one card per channel.

The lease and the pace are shortened by setting (a 1 s lease, ten cards a second): thirty
reviews for one channel keep the deliverer busy three times longer than one lease.
"""

import pytest
from sqlalchemy import text

from models.core.db import create_db_engine
from testing.slack import text_of
from tests.e2e.slack.gateway import CHANNEL, database_url_of, serving_gateway

REVIEWS = 30


def undelivered_events(environment: dict[str, str]) -> int:
    """Outbox events no deliverer has finished: until none are left, posts may still come."""
    engine = create_db_engine(database_url_of(environment))
    try:
        with engine.connect() as connection:
            query = text("SELECT count(*) FROM outbox_event WHERE delivered_at IS NULL")
            return int(connection.execute(query).scalar_one())
    finally:
        engine.dispose()


# SQLite: the claims keeping cards single are tested on both databases in tests/models.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_backlog_longer_than_a_lease_gets_one_card_per_review(environment, slack, tmp_path):
    environment["ACCESSGATE_OUTBOX_LEASE_SECONDS"] = "1"
    environment["ACCESSGATE_SLACK_CHANNEL_MESSAGES_PER_SECOND"] = "10"
    slack.pace_channels(10.0, burst=1)
    with serving_gateway(environment, tmp_path / "serve.log") as gateway:
        sessions = [gateway.open_session(f"select {n}") for n in range(REVIEWS)]
        review_ids = [session["review"]["id"] for session in sessions]

        def cards_of(review_id: str) -> list:
            return [m for m in slack.messages(CHANNEL) if review_id in text_of(m)]

        slack.wait_for(
            lambda: all(cards_of(review_id) for review_id in review_ids),
            timeout=30,
            message="not every review got its card",
        )
        for session in sessions[:5]:  # decided while later cards are still being posted
            gateway.approve(session)
        slack.wait_for(
            lambda: all(
                "APPROVED" in text_of(cards_of(s["review"]["id"])[0]) for s in sessions[:5]
            ),
            message="the decided reviews' cards were not rewritten",
        )
        slack.wait_for(
            lambda: undelivered_events(environment) == 0,
            message="the outbox was not drained",
        )
        settled = len(slack.messages(CHANNEL))

    counts = {review_id: len(cards_of(review_id)) for review_id in review_ids}
    assert counts == dict.fromkeys(review_ids, 1), "one card per review, never a second"
    assert settled == REVIEWS
    assert slack.pacing_violations == 0
