"""Every answer reaches the person who clicked, views stay fresh, and scopes are checked.

Stories over the Slack-compatible server with the service's own slack_bolt / slack_sdk clients:
refusals through the interaction's response_url wherever the click came from, modals that open
before slow checks, the pending list and App Home after decisions from any door, and a bot
token missing a scope refused when it is configured.
"""

import pytest

from testing.slack import SlackServer, text_of
from tests.e2e.slack.gateway import (
    APP_TOKEN,
    CHANNEL,
    REVIEWER,
    STRANGER,
    UNLINKED,
    Gateway,
    bearer,
    card_of,
    chat_config,
    serving_gateway,
    wait_for_modal_text,
    wait_for_text,
)

NOT_A_REVIEWER = "not in any reviewer group"


def answers_to(slack: SlackServer, chat_id: str) -> list[dict]:
    """What the app sent through response_urls of this person's interactions, accepted."""
    return [r for r in slack.responses if r["user_id"] == chat_id and r["status"] == 200]


def test_a_refusal_reaches_the_clicker_in_a_channel_the_bot_is_not_in(gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)
    slack.remove_bot_from_channel(CHANNEL)  # say the bot was removed after posting

    slack.click(STRANGER, card, "review.approve")

    slack.wait_for(lambda: answers_to(slack, STRANGER), message="no answer through response_url")
    (answer,) = answers_to(slack, STRANGER)
    assert NOT_A_REVIEWER in answer["body"]["text"]
    assert answer["body"]["response_type"] == "ephemeral"
    assert answer["body"]["replace_original"] is False, "the card itself stays as it is"
    assert [e["text"] for e in slack.ephemerals(STRANGER)] == [answer["body"]["text"]]
    assert slack.calls_to("chat.postEphemeral") == [], "no ephemeral the channel would refuse"
    assert gateway.review(session)["status"] == "PENDING"


def test_without_a_usable_response_url_the_refusal_becomes_a_direct_message(gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)
    slack.remove_bot_from_channel(CHANNEL)
    slack.response_url_ttl = 0  # every response_url has expired by the time the app answers

    slack.click(STRANGER, card, "review.approve")

    slack.wait_for(
        lambda: any(NOT_A_REVIEWER in m.text for m in slack.dms(STRANGER)),
        message="no direct message once the response_url and the channel both refused",
    )
    expired = [r for r in slack.responses if r["user_id"] == STRANGER]
    assert [r["status"] for r in expired] == [404], "the response_url was tried first"
    refused = [c.error for c in slack.calls_to("chat.postEphemeral")]
    assert refused == ["not_in_channel"], "then an ephemeral in the channel, then the DM"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_modals_open_before_checking_the_clicker_and_tell_a_refusal_inside(
    environment, slack, tmp_path
):
    environment["ACCESSGATE_SLACK_MATCH_EMAIL"] = "true"
    with serving_gateway(environment, tmp_path / "serve.log") as gateway:
        card = card_of(slack, gateway.open_session())

        # Slack will not say who Nora is: matching her by e-mail fails, and she is told why.
        slack.fail_next("users.info", error="user_not_visible")
        slack.click(UNLINKED, card, "review.approve_window")
        slack.wait_for(lambda: slack.open_views(UNLINKED), message="the modal did not open")
        refused = slack.open_views(UNLINKED)[-1]
        wait_for_modal_text(slack, refused["id"], "user_not_visible")
        assert "/accessgate link" in text_of(slack.view(refused["id"]))

        # Now Slack answers, but later than a trigger lives: the modal opened first all the same.
        bearer(environment, sub="nora", email="nora@example.com", groups=("dba",))
        slack.delay_next("users.info", slack.trigger_ttl + 0.5)
        slack.click(UNLINKED, card, "review.reject")
        slack.wait_for(
            lambda: len(slack.calls_to("views.open")) == 2, message="the modal did not open"
        )
        assert [c.error for c in slack.calls_to("views.open")] == [None, None]
        modal = slack.open_views(UNLINKED)[-1]
        assert modal["title"]["text"] == "Reject access"
        slack.wait_for(
            lambda: {u["sub"]: u["chat_id"] for u in users_of(gateway)}["nora"] == UNLINKED,
            message="Nora was not linked by e-mail",
        )
        slack.submit_view(UNLINKED, modal, {"reason": {"reason_input": "not today"}})
        wait_for_text(slack, CHANNEL, card.ts, "REJECTED")


def test_the_pending_list_follows_decisions_from_it_and_from_the_api(gateway, slack):
    first = gateway.open_session("select 1")
    second = gateway.open_session("select 2")
    card_of(slack, first), card_of(slack, second)
    slack.slash_command(REVIEWER, "pending")
    slack.wait_for(lambda: slack.ephemerals(REVIEWER), message="no pending list")
    listed = slack.ephemerals(REVIEWER)[-1]
    assert first["review"]["id"] in str(listed["blocks"])
    assert second["review"]["id"] in str(listed["blocks"])

    slack.click(REVIEWER, listed, "review.approve", value=first["review"]["id"])

    slack.wait_for(
        lambda: first["review"]["id"] not in str(slack.ephemerals(REVIEWER)[-1]["blocks"]),
        message="the pending list still shows the approved review",
    )
    refreshed = slack.ephemerals(REVIEWER)
    assert len(refreshed) == 1, "the list was replaced, not repeated"
    assert second["review"]["id"] in str(refreshed[0]["blocks"])
    assert "1 review(s) waiting on you" in refreshed[0]["text"]

    # A decision through the API replaces the list the reviewer is looking at, too.
    gateway.approve(second)
    slack.wait_for(
        lambda: "Nothing is waiting on you" in text_of(slack.ephemerals(REVIEWER)[-1]),
        message="the pending list still shows a review decided through the API",
    )
    assert len(slack.ephemerals(REVIEWER)) == 1


def test_app_home_follows_reviews_filed_and_decided_through_the_api(gateway, slack):
    slack.open_app_home(REVIEWER)
    slack.wait_for(lambda: slack.home_view(REVIEWER), message="no App Home for the reviewer")
    assert "Nothing is waiting on you" in text_of(slack.home_view(REVIEWER))

    session = gateway.open_session("select * from invoices")
    slack.wait_for(
        lambda: "pg-prod" in text_of(slack.home_view(REVIEWER)),
        message="the new review never reached the reviewer's App Home",
    )

    gateway.approve(session)
    slack.wait_for(
        lambda: "Nothing is waiting on you" in text_of(slack.home_view(REVIEWER)),
        message="the App Home still lists a review decided through the API",
    )
    publishes = [c for c in slack.calls_to("views.publish") if c.params["user_id"] == REVIEWER]
    assert all(c.error is None for c in publishes)
    assert slack.home_view(STRANGER) is None, "people who review nothing are left alone"


def test_a_bot_token_missing_a_scope_is_refused_with_the_scope_named(gateway, slack):
    slack.add_app(
        bot_token="xoxb-3-no-im-write",
        app_token="xapp-3-A0001-no-im-write",
        bot_scopes=["chat:write", "commands"],
    )

    response = gateway.api.put(
        "/plugins/chat/config",
        json=chat_config(bot_token="xoxb-3-no-im-write", app_token="xapp-3-A0001-no-im-write"),
        headers=gateway.admin,
    )

    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert "im:write" in message
    assert "chat:write" not in message, "only what is missing is named"
    assert gateway.chat_status()["state"] == "connected", "the old tokens keep working"
    assert slack.socket_connections(APP_TOKEN) == 1


def test_an_app_token_is_checked_even_when_the_bot_token_check_cannot_run(gateway, slack):
    slack.fail_next("auth.test", status=500, times=3)  # Slack unwell: the bot token is stored

    response = gateway.api.put(
        "/plugins/chat/config",
        json=chat_config(app_token="xapp-9-A0001-unknown"),
        headers=gateway.admin,
    )

    assert response.status_code == 422, response.text
    assert "CHAT_APP_TOKEN" in response.json()["message"]


def users_of(gateway: Gateway) -> list[dict]:
    return gateway.api.get("/users", headers=gateway.admin).json()
