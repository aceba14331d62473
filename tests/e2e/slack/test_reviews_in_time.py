"""Reviews that live in time, over the Slack server: a reminder in the card's thread, a review
that expires, JIT access that ends, and a rule that requires a reason.

The settings are shortened to seconds (and the scheduler looks five times a second); the tests
wait for what Slack shows, never for a fixed time.
"""

import pytest

from testing.slack import text_of
from tests.e2e.slack.gateway import (
    CHANNEL,
    REQUESTER,
    REVIEWER,
    action_ids,
    card_of,
    wait_for_text,
)

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture
def environment(environment) -> dict[str, str]:
    environment["ACCESSGATE_REVIEW_EXPIRES_AFTER"] = "4s"
    environment["ACCESSGATE_REVIEW_REMIND_AFTER"] = "1s"
    environment["ACCESSGATE_REVIEW_REMINDERS"] = "1"
    environment["ACCESSGATE_SCHEDULER_INTERVAL_SECONDS"] = "0.2"
    return environment


def test_a_review_nobody_decides_is_reminded_then_expires(gateway, slack):
    session = gateway.open_session("select * from payments")

    card = card_of(slack, session)
    assert "*Expires*" in text_of(card)
    slack.wait_for(
        lambda: [m for m in slack.messages(CHANNEL) if m.thread_ts == card.ts],
        message="no reminder in the card's thread",
    )
    [reminder] = [m for m in slack.messages(CHANNEL) if m.thread_ts == card.ts]
    assert "Still waiting on *dba*" in reminder.text
    assert f"<@{REVIEWER}>" in reminder.text, "the linked reviewer is mentioned"

    wait_for_text(slack, CHANNEL, card.ts, "REJECTED")
    expired = slack.message(CHANNEL, card.ts)
    assert action_ids(expired) == [], "an expired card has no buttons"
    assert "expired: nobody decided within 4 seconds" in text_of(expired)
    slack.wait_for(lambda: slack.dms(REQUESTER), message="the requester was not told")
    told = text_of(slack.dms(REQUESTER)[0])
    assert "was rejected" in told
    assert "expired" in told
    review = gateway.review(session)
    assert review["status"] == "REJECTED"
    late = gateway.api.put(
        f"/reviews/{review['id']}", json={"status": "APPROVED"}, headers=gateway.reviewer
    )
    assert late.status_code == 400
    threaded = [m for m in slack.messages(CHANNEL) if m.thread_ts == card.ts]
    assert len(threaded) == 1, "one reminder, as configured"


def test_jit_access_that_ends_rewrites_its_card_and_tells_the_requester(gateway, slack):
    opened = gateway.api.post(
        "/sessions",
        json={
            "connection": "pg-prod",
            "script": "select 1",
            "type": "jit",
            "access_duration": 2_000_000_000,
        },
        headers=gateway.requester,
    )
    assert opened.status_code == 201, opened.text
    session = opened.json()
    card = card_of(slack, session)
    gateway.approve(session)
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")

    wait_for_text(slack, CHANNEL, card.ts, "access ended")

    ended = slack.message(CHANNEL, card.ts)
    assert action_ids(ended) == [], "no Revoke button once access has ended"
    assert "Access ended at" in text_of(ended)
    slack.wait_for(
        lambda: any("has ended" in text_of(m) for m in slack.dms(REQUESTER)),
        message="the requester was not told their access ended",
    )
    assert sum("has ended" in text_of(m) for m in slack.dms(REQUESTER)) == 1


def test_a_rule_that_requires_a_reason_refuses_without_and_the_card_shows_it(gateway, slack):
    rule = {
        "name": "prod-needs-a-reason",
        "connections": ["pg-prod"],
        "approval_groups": ["dba"],
        "require_reason": True,
    }
    created = gateway.api.post("/access-request-rules", json=rule, headers=gateway.admin)
    assert created.status_code == 201, created.text
    body = {"connection": "pg-prod", "script": "select 1"}

    refused = gateway.api.post("/sessions", json=body, headers=gateway.requester)
    given = gateway.api.post(
        "/sessions", json={**body, "reason": "INC-42 restore"}, headers=gateway.requester
    )

    assert refused.status_code == 400
    assert "requires a reason" in refused.json()["message"]
    assert given.status_code == 201, given.text
    card = card_of(slack, given.json())
    assert "*Why*\n> INC-42 restore" in text_of(card)


def test_a_reviewer_who_prefers_dms_gets_a_digest_instead_of_mentions(gateway, slack):
    slack.open_app_home(REVIEWER)
    slack.wait_for(lambda: slack.home_view(REVIEWER), message="no App Home for the reviewer")
    slack.click(REVIEWER, slack.home_view(REVIEWER), "preferences.reminders_by_dm", value="on")
    slack.wait_for(
        lambda: "Mention me under each card instead" in text_of(slack.home_view(REVIEWER)),
        message="the App Home did not show the new preference",
    )
    sessions = [gateway.open_session(f"select {n}") for n in range(2)]
    cards = [card_of(slack, session) for session in sessions]

    slack.wait_for(
        lambda: any("2 reviews still waiting on you" in m.text for m in slack.dms(REVIEWER)),
        message="no digest DM for the reviewer",
    )
    slack.wait_for(
        lambda: all(any(m.thread_ts == card.ts for m in slack.messages(CHANNEL)) for card in cards),
        message="the cards' threads were not reminded",
    )
    digest = next(m for m in slack.dms(REVIEWER) if "still waiting" in m.text)
    for session in sessions:
        assert session["review"]["id"] in text_of(digest)
    reminders = [m for m in slack.messages(CHANNEL) if m.thread_ts]
    assert all(f"<@{REVIEWER}>" not in m.text for m in reminders), "no mention for DM-takers"
