"""The Slack bot as reviewers meet it: `accessgate serve` talking to a Slack-compatible server.

Everything crosses a real wire: the service's own slack_bolt / slack_sdk clients call the local
Slack server's Web API and hold a Socket Mode WebSocket to it; the server clicks, submits and
types the way Slack does. Nothing in the service is replaced.
"""

import re
import time

import httpx
import pytest

from testing.postgres import free_port
from testing.processes import running_server
from testing.slack import SlackServer, buttons, text_of
from tests.e2e.slack.gateway import (
    APP_TOKEN,
    CHANNEL,
    REQUESTER,
    REVIEWER,
    STRANGER,
    UNLINKED,
    Gateway,
    action_ids,
    bearer,
    card_of,
    chat_config,
    decisions_in_database,
    serving_gateway,
    set_up_gateway,
    wait_for_modal_text,
    wait_for_text,
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_reviewer_approves_from_the_card_and_the_requester_is_told(environment, gateway, slack):
    session = gateway.open_session("select * from payments where amount > 1000")

    card = card_of(slack, session)
    assert action_ids(card) == ["review.approve", "review.reject", "review.approve_window"]
    assert all(b["value"] == session["review"]["id"] for b in buttons(card))
    card_text = text_of(card)
    for shown in ("Rita Requester", "rita@example.com", "pg-prod", "dba", "select * from payments"):
        assert shown in card_text

    ack = slack.click(REVIEWER, card, "review.approve")

    assert ack.elapsed < 3.0
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")
    updated = slack.message(CHANNEL, card.ts)
    assert action_ids(updated) == ["review.revoke"], "a decided card keeps only Revoke"
    assert "Dan Reviewer" in text_of(updated) or f"<@{REVIEWER}>" in text_of(updated)
    slack.wait_for(lambda: slack.dms(REQUESTER), message="the requester got no DM")
    assert "approved" in text_of(slack.dms(REQUESTER)[0]).lower()
    review = gateway.review(session)
    assert review["status"] == "APPROVED"
    assert review["review_groups_data"][0]["reviewed_by"]["chat_id"] == REVIEWER
    assert decisions_in_database(environment, review["id"]) == [("slack", "APPROVED")]

    # Revoke, behind Slack's confirm dialog, by the requester who owns the access.
    revoke = next(b for b in buttons(updated) if b["action_id"] == "review.revoke")
    assert revoke["confirm"]
    slack.click(REQUESTER, updated, "review.revoke")
    wait_for_text(slack, CHANNEL, card.ts, "REVOKED")
    assert action_ids(slack.message(CHANNEL, card.ts)) == []
    slack.wait_for(lambda: len(slack.dms(REQUESTER)) == 2, message="no DM about the revocation")
    assert "revoked" in text_of(slack.dms(REQUESTER)[1]).lower()
    assert len(slack.messages(CHANNEL)) == 1, "one card, rewritten; never a second one"


def test_reject_asks_for_a_reason_in_a_modal(gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)

    slack.click(REVIEWER, card, "review.reject")

    slack.wait_for(lambda: slack.open_views(REVIEWER), message="no modal opened")
    modal = slack.open_views(REVIEWER)[-1]
    ack = slack.submit_view(
        REVIEWER, modal, {"reason": {"reason_input": "no change ticket for this query"}}
    )
    assert ack.payload is not None
    assert ack.payload["response_action"] == "update"  # the modal says it is working on it
    wait_for_modal_text(slack, modal["id"], "Rejected.")
    wait_for_text(slack, CHANNEL, card.ts, "REJECTED")
    assert "no change ticket for this query" in text_of(slack.message(CHANNEL, card.ts))
    assert action_ids(slack.message(CHANNEL, card.ts)) == []
    slack.wait_for(lambda: slack.dms(REQUESTER), message="the requester got no DM")
    assert "no change ticket for this query" in text_of(slack.dms(REQUESTER)[0])
    review = gateway.review(session)
    assert (review["status"], review["rejection_reason"]) == (
        "REJECTED",
        "no change ticket for this query",
    )


def test_approve_with_a_time_window_from_the_modal(gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)
    slack.click(REVIEWER, card, "review.approve_window")
    slack.wait_for(lambda: slack.open_views(REVIEWER), message="no modal opened")
    modal = slack.open_views(REVIEWER)[-1]

    same = slack.submit_view(
        REVIEWER,
        modal,
        {
            "window_start": {"window_start_input": "09:00"},
            "window_end": {"window_end_input": "09:00"},
        },
    )
    assert same.payload["response_action"] == "errors"
    assert gateway.review(session)["status"] == "PENDING", "a refused window decides nothing"

    slack.submit_view(
        REVIEWER,
        modal,
        {
            "window_start": {"window_start_input": "22:00"},
            "window_end": {"window_end_input": "02:00"},
        },
    )
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")
    wait_for_modal_text(slack, modal["id"], "within the time window")
    review = gateway.review(session)
    assert review["time_window"] == {
        "type": "time_range",
        "configuration": {"start_time": "22:00", "end_time": "02:00"},
    }
    assert "22:00" in text_of(slack.message(CHANNEL, card.ts))


def test_refusals_come_back_as_ephemeral_messages_in_plain_words(environment, gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)

    slack.click(UNLINKED, card, "review.approve")
    slack.click(REQUESTER, card, "review.approve")
    slack.click(STRANGER, card, "review.approve")

    slack.wait_for(lambda: slack.ephemerals(UNLINKED), message="no word to the unlinked user")
    assert "/accessgate link" in slack.ephemerals(UNLINKED)[0]["text"]
    slack.wait_for(lambda: slack.ephemerals(REQUESTER), message="no word to the requester")
    assert "your own session" in slack.ephemerals(REQUESTER)[0]["text"]
    slack.wait_for(lambda: slack.ephemerals(STRANGER), message="no word to the stranger")
    assert "not in any reviewer group" in slack.ephemerals(STRANGER)[0]["text"]
    assert gateway.review(session)["status"] == "PENDING"

    # Two reviewers' clicks arriving together, and a duplicate: one decision, one approval.
    first = slack.submit_click(REVIEWER, card, "review.approve")
    second = slack.submit_click(REVIEWER, card, "review.approve")
    first.result(10), second.result(10)
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")
    assert decisions_in_database(environment, session["review"]["id"]) == [("slack", "APPROVED")]

    # Revoking is for the requester and admins.
    slack.click(STRANGER, slack.message(CHANNEL, card.ts), "review.revoke")
    slack.wait_for(lambda: len(slack.ephemerals(STRANGER)) == 2, message="no word on revoke")
    assert "can revoke it" in slack.ephemerals(STRANGER)[1]["text"]
    assert gateway.review(session)["status"] == "APPROVED"
    for user in (UNLINKED, REQUESTER, STRANGER):
        assert all(e["channel"] == CHANNEL for e in slack.ephemerals(user))


def test_decisions_made_through_the_api_update_the_cards_too(gateway, slack):
    session = gateway.open_session()
    card = card_of(slack, session)

    response = gateway.api.put(
        f"/reviews/{session['id']}",
        json={"status": "REJECTED", "rejection_reason": "use the replica"},
        headers=gateway.reviewer,
    )

    assert response.status_code == 200
    wait_for_text(slack, CHANNEL, card.ts, "REJECTED")
    assert "use the replica" in text_of(slack.message(CHANNEL, card.ts))
    slack.wait_for(lambda: slack.dms(REQUESTER), message="the requester got no DM")
    assert "use the replica" in text_of(slack.dms(REQUESTER)[0])


# -- the slash command and App Home -------------------------------------------------------------


def test_a_slack_user_links_their_account_with_a_one_time_code(environment, gateway, slack):
    nora = bearer(environment, sub="nora", name="Nora New", groups=("dba",))
    session = gateway.open_session()
    card = card_of(slack, session)

    slack.slash_command(UNLINKED, "link")

    slack.wait_for(lambda: slack.responses, message="no answer to /accessgate link")
    answer = slack.responses[-1]["body"]
    assert answer.get("response_type") == "ephemeral"
    named = re.search(r"`accessgate chat link (\w+)`", answer["text"])
    assert named is not None, answer["text"]
    code = named.group(1)
    assert f"/chat/link?code={code}|" in answer["text"], "and the page that links in a browser"
    linked = gateway.api.post("/users/me/chat-link", json={"code": code}, headers=nora)
    assert linked.status_code == 200, linked.text
    assert linked.json()["chat_id"] == UNLINKED
    again = gateway.api.post("/users/me/chat-link", json={"code": code}, headers=nora)
    assert again.status_code == 400
    assert "used or expired" in again.json()["message"]

    slack.slash_command(UNLINKED, "pending")
    slack.wait_for(lambda: len(slack.responses) == 2, message="no answer to /accessgate pending")
    pending = slack.responses[-1]["body"]
    assert session["review"]["id"] in text_of(pending) or "pg-prod" in text_of(pending)
    assert "review.approve" in [b["action_id"] for b in buttons(pending)]

    slack.click(UNLINKED, card, "review.approve")
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")

    help_ack = slack.slash_command(UNLINKED, "help")
    assert "link" in help_ack.payload["text"]
    assert "pending" in help_ack.payload["text"]
    unknown = slack.slash_command(UNLINKED, "<!channel>")
    assert unknown.payload["text"].startswith("I do not know “&lt;!channel&gt;”.")


def test_app_home_lists_the_reviews_waiting_on_the_reviewer(gateway, slack):
    session = gateway.open_session()
    card_of(slack, session)

    slack.open_app_home(REVIEWER)
    slack.open_app_home(UNLINKED)

    slack.wait_for(lambda: slack.home_view(REVIEWER), message="no App Home for the reviewer")
    assert "pg-prod" in text_of(slack.home_view(REVIEWER))
    slack.wait_for(lambda: slack.home_view(UNLINKED), message="no App Home for the stranger")
    assert "/accessgate link" in text_of(slack.home_view(UNLINKED))


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_email_matching_links_on_first_click_when_switched_on(environment, slack, tmp_path):
    environment["ACCESSGATE_SLACK_MATCH_EMAIL"] = "true"
    with serving_gateway(environment, tmp_path / "serve.log") as gateway:
        bearer(environment, sub="nora", email="nora@example.com", groups=("dba",))
        session = gateway.open_session()
        card = card_of(slack, session)

        slack.click(UNLINKED, card, "review.approve")

        wait_for_text(slack, CHANNEL, card.ts, "APPROVED")
        users = gateway.api.get("/users", headers=gateway.admin).json()
        assert {u["sub"]: u["chat_id"] for u in users}["nora"] == UNLINKED


# -- configuration at runtime -------------------------------------------------------------------


def test_new_tokens_take_effect_without_a_restart(gateway, slack):
    new_bot, new_app = "xoxb-2-rotated-bot", "xapp-2-A0001-rotated-app"
    slack.add_app(bot_token=new_bot, app_token=new_app)

    refused = gateway.api.put(
        "/plugins/chat/config",
        json=chat_config(bot_token="xoxb-unknown-token"),
        headers=gateway.admin,
    )
    assert refused.status_code == 422
    assert "invalid_auth" in refused.json()["message"]
    assert slack.socket_connections(APP_TOKEN) == 1, "the old connection keeps running"

    swapped = gateway.api.put(
        "/plugins/chat/config", json=chat_config(new_bot, new_app), headers=gateway.admin
    )

    assert swapped.status_code == 200
    assert swapped.json()["config"]["envvars"]["CHAT_BOT_TOKEN"] == "REDACTED"
    # The same Slack app, its tokens rotated: one connection, opened with the new app token.
    slack.wait_for(
        lambda: slack.calls_to("apps.connections.open")[-1].token == new_app,
        message="no connection with the new app token",
    )
    slack.wait_for(lambda: slack.socket_connections(new_app) == 1, message="old socket open")
    status = gateway.wait_for_state("connected")
    assert (status["team"], status["mode"]) == ("Acme", "socket")
    session = gateway.open_session()
    card = card_of(slack, session)
    posts = [c for c in slack.calls_to("chat.postMessage") if c.ok]
    assert posts[-1].token == new_bot
    slack.click(REVIEWER, card, "review.approve", app_token=new_app)
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")

    assert gateway.api.delete("/plugins/chat", headers=gateway.admin).status_code == 204
    assert gateway.wait_for_state("stopped")["team"] is None
    slack.wait_for(lambda: slack.socket_connections(new_app) == 0, message="bot kept running")


def test_an_unreachable_slack_is_stored_and_retried(gateway, slack):
    slack.fail_next("auth.test", status=503, times=3)

    response = gateway.api.put(
        "/plugins/chat/config",
        json=chat_config(app_token=None, CHAT_SIGNING_SECRET="s3cr3t"),
        headers=gateway.admin,
    )

    assert response.status_code == 200
    assert sorted(response.json()["config"]["envvars"]) == ["CHAT_BOT_TOKEN", "CHAT_SIGNING_SECRET"]
    status = gateway.wait_for_state("connected", timeout=30)
    assert status["mode"] == "http"
    failed_checks = [c for c in slack.calls_to("auth.test") if c.status == 503]
    assert len(failed_checks) == 3


# -- delivery through outages -------------------------------------------------------------------


def test_slack_429_and_500_lose_and_duplicate_nothing(gateway, slack):
    slack.fail_next("chat.postMessage", status=429, retry_after=1, times=3)
    slack.fail_next("chat.postMessage", status=500, times=3)
    slack.fail_next("chat.update", status=500, times=3)

    sessions = [gateway.open_session(f"select {n}") for n in range(5)]
    # Posts are retried by the outbox, with backoff (and a look in the channel after each 500,
    # which may have posted): allow for it.
    cards = [card_of(slack, session, timeout=40) for session in sessions]
    slack.click(REVIEWER, cards[0], "review.approve")

    wait_for_text(slack, CHANNEL, cards[0].ts, "APPROVED")
    assert len(slack.messages(CHANNEL)) == 5
    assert len({m.ts for m in slack.messages(CHANNEL)}) == 5
    refused = [c for c in slack.calls_to("chat.postMessage") if c.status in (429, 500)]
    assert len(refused) == 6


def test_undelivered_events_are_delivered_once_after_a_restart(environment, slack, tmp_path):
    # First run: Slack is down for this process (nothing listens at its API URL), so the
    # reviews created meanwhile stay in the outbox.
    dead_slack = dict(environment, ACCESSGATE_SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/")
    with (
        running_server(dead_slack, free_port(), tmp_path / "first.log") as server,
        set_up_gateway(dead_slack, server) as gateway,
    ):
        assert gateway.wait_for_state("retrying")["last_error"]
        sessions = [gateway.open_session(f"select {n}") for n in range(3)]
        gateway.api.put(
            f"/reviews/{sessions[0]['id']}", json={"status": "APPROVED"}, headers=gateway.reviewer
        )
    assert slack.messages(CHANNEL) == []

    # Second run, Slack reachable: every card once, already showing the decision made meanwhile.
    with running_server(environment, free_port(), tmp_path / "second.log") as server:
        cards = [card_of(slack, session) for session in sessions]
        assert "APPROVED" in text_of(cards[0])
        slack.wait_for(lambda: slack.dms(REQUESTER), message="the approval DM was lost")
    # Third run: nothing left to deliver, nothing posted again.
    with (
        running_server(environment, free_port(), tmp_path / "third.log") as server,
        Gateway(httpx.Client(base_url=server), *(gateway.admin,) * 4) as third,
    ):
        third.wait_for_state("connected")
        time.sleep(1.5)  # a notifier poll and more
    assert len(slack.messages(CHANNEL)) == 3
    assert len(slack.dms(REQUESTER)) == 1


def test_http_mode_accepts_only_requests_signed_with_the_signing_secret(environment, server, slack):
    secret = slack.signing_secret()
    config = chat_config(app_token=None, CHAT_SIGNING_SECRET=secret)
    with set_up_gateway(environment, server, config=config) as gateway:
        check_http_mode(slack, gateway, server, secret)


def check_http_mode(slack: SlackServer, gateway: Gateway, server: str, secret: str) -> None:
    assert gateway.wait_for_state("connected")["mode"] == "http"
    events_url = server.removesuffix("/api") + "/slack/events"
    session = gateway.open_session()
    card = card_of(slack, session)

    forged = slack.click(
        REVIEWER, card, "review.approve", via="http", http_url=events_url, signing_secret="wrong"
    )
    stale = slack.click(
        REVIEWER,
        card,
        "review.approve",
        via="http",
        http_url=events_url,
        signing_secret=secret,
        timestamp=int(time.time()) - 6 * 60,
    )
    assert (forged.status, stale.status) == (401, 401)
    assert forged.payload is not None
    assert "CHAT_SIGNING_SECRET" in forged.payload["message"]
    assert stale.payload is not None
    assert "X-Slack-Request-Timestamp within five minutes" in stale.payload["message"]
    unsigned = httpx.post(events_url, content=b"x" * 100)  # refused before its body is read
    assert unsigned.status_code == 401
    assert gateway.review(session)["status"] == "PENDING"

    signed = slack.click(
        REVIEWER, card, "review.approve", via="http", http_url=events_url, signing_secret=secret
    )

    assert signed.status == 200
    wait_for_text(slack, CHANNEL, card.ts, "APPROVED")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_new_cards_keep_slacks_pace_per_channel(environment, slack, tmp_path):
    # Slack takes about one message per second per channel; here both sides agree on five.
    environment["ACCESSGATE_SLACK_CHANNEL_MESSAGES_PER_SECOND"] = "5"
    slack.pace_channels(5.0, burst=1)
    with serving_gateway(environment, tmp_path / "serve.log") as gateway:
        sessions = [gateway.open_session(f"select {n}") for n in range(8)]

        for session in sessions:
            card_of(slack, session)

    assert slack.pacing_violations == 0
    posted = sorted(m.posted_at for m in slack.messages(CHANNEL))
    assert len(posted) == 8
