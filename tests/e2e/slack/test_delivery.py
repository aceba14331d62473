"""Delivery that does not go as planned: a queue longer than a lease, a post Slack took without
answering, a channel the bot was removed from. Every review still gets exactly one card per
channel, and an admin sees (and can retry) what could not be delivered.
"""

import pytest

from testing.slack import text_of
from tests.e2e.slack.gateway import (
    CHANNEL,
    card_of,
    serving_gateway,
    undelivered_events,
    wait_for_text,
)

REVIEWS = 30


# SQLite: the claims keeping cards single are tested on both databases in tests/models.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_backlog_longer_than_a_lease_gets_one_card_per_review(environment, slack, tmp_path):
    # The lease and the pace are shortened by setting (a 1 s lease, ten cards a second): thirty
    # reviews for one channel keep the deliverer busy three times longer than one lease.
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


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_card_slack_posted_without_answering_is_adopted_not_posted_twice(
    environment, gateway, slack
):
    # Slack posts the card, then its answer is lost: an HTTP 500 instead of the ts.
    slack.fail_next("chat.postMessage", status=500, after_handling=True)
    session = gateway.open_session()

    card = card_of(slack, session)
    slack.wait_for(
        lambda: undelivered_events(environment) == 0, message="the card was never settled"
    )
    assert len(slack.calls_to("chat.postMessage")) == 1, "found in the channel, not re-posted"
    assert slack.calls_to("conversations.history"), "looked for in the channel"
    gateway.approve(session)
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")  # the adopted card is the one rewritten
    assert len(slack.messages(CHANNEL)) == 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_channel_the_bot_left_shows_failing_and_its_cards_can_be_retried(gateway, slack):
    slack.remove_bot_from_channel(CHANNEL)
    session = gateway.open_session()

    slack.wait_for(
        lambda: gateway.chat_status()["channels"], message="the failing channel never showed"
    )
    status = gateway.chat_status()
    assert status["state"] == "connected", "the connection itself is fine"
    [channel] = status["channels"]
    assert (channel["channel"], channel["state"]) == (CHANNEL, "failing")
    assert channel["last_error"] == "not_in_channel"
    failed = gateway.api.get("/plugins/chat/deliveries", headers=gateway.admin).json()
    [delivery] = failed["items"]
    assert delivery["review_id"] == session["review"]["id"]
    assert delivery["status"] == "failed"
    assert "not_in_channel" in delivery["error"]
    assert failed["next_cursor"] is None
    retry = f"/plugins/chat/deliveries/{delivery['id']}/retry"
    assert gateway.api.post(retry, headers=gateway.reviewer).status_code == 403

    slack.add_bot_to_channel(CHANNEL)  # someone invites the bot back
    retried = gateway.api.post(retry, headers=gateway.admin)

    assert retried.status_code == 201, retried.text
    card_of(slack, session)
    slack.wait_for(
        lambda: gateway.chat_status()["channels"][0]["state"] == "ok",
        message="the channel never recovered",
    )
    assert gateway.api.get("/plugins/chat/deliveries", headers=gateway.admin).json()["items"] == []
    again = gateway.api.post(retry, headers=gateway.admin)
    assert again.status_code == 409
    assert "retried" in again.json()["message"]
    unknown = gateway.api.post("/plugins/chat/deliveries/999999/retry", headers=gateway.admin)
    assert unknown.status_code == 404
