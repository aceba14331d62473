"""The loopback Slack's Web API, driven by the real slack_sdk client."""

import json
import time
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from testing.slack import (
    buttons,
    text_of,
)
from tests.testing.slack.support import (
    ADA,
    APP,
    BOT,
    REQUEST_FORM,
    plain,
    review_card,
)

# ---- Web API --------------------------------------------------------------------------------


def test_auth_test_answers_for_the_bot_and_refuses_bad_tokens(slack, web):
    answer = web.auth_test()
    assert answer["ok"] is True
    assert answer["user_id"] == "U0BOT"
    assert answer["team_id"] == "T0001"
    assert answer["bot_id"] == "B0001"
    assert answer["is_enterprise_install"] is False

    with pytest.raises(SlackApiError) as unknown:
        WebClient(token="xoxb-unknown", base_url=slack.base_url).auth_test()
    assert unknown.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as missing:
        WebClient(base_url=slack.base_url).api_call("auth.test")
    assert missing.value.response["error"] == "not_authed"
    with pytest.raises(SlackApiError) as wrong_kind:
        web.apps_connections_open(app_token=BOT)
    assert wrong_kind.value.response["error"] == "not_allowed_token_type"

    slack.add_app(bot_token="xoxb-0002-new", app_token=APP)  # a rotated token, same app
    slack.revoke_token(BOT)
    with pytest.raises(SlackApiError) as revoked:
        web.auth_test()
    assert revoked.value.response["error"] == "invalid_auth"
    assert WebClient(token="xoxb-0002-new", base_url=slack.base_url).auth_test()["ok"]
    assert [call.error for call in slack.calls_to("auth.test")] == [
        None,
        "invalid_auth",
        "not_authed",
        "invalid_auth",
        None,
    ]


def test_post_message_accepts_form_and_json_bodies(slack, web):
    blocks = review_card()
    as_form = web.api_call(
        "chat.postMessage",
        data={"channel": "C1", "text": "form", "blocks": json.dumps(blocks)},
    )
    as_json = web.api_call(
        "chat.postMessage",
        json={"channel": "C1", "text": "json", "blocks": blocks, "thread_ts": as_form["ts"]},
    )
    assert as_form["channel"] == "C1"
    assert float(as_json["ts"]) > float(as_form["ts"])
    assert as_json["message"]["blocks"] == blocks

    first, second = slack.messages("C1")
    assert (first.text, first.blocks, first.user, first.thread_ts) == (
        "form",
        blocks,
        "U0BOT",
        None,
    )
    assert (second.text, second.blocks, second.thread_ts) == ("json", blocks, as_form["ts"])
    assert slack.message("C1", as_json["ts"]).text == "json"
    assert [call.params["blocks"] for call in slack.calls_to("chat.postMessage")] == [blocks] * 2
    assert all(call.token == BOT for call in slack.calls)

    assert [b["action_id"] for b in buttons(first)] == ["approve", "reject", "open_form"]
    reject = buttons(first)[1]
    assert (reject["style"], reject["value"], reject["text"]) == ("danger", "42", "Reject")
    assert reject["confirm"]["title"]["text"] == "Reject?"
    assert "*ada* asks for *db-prod*" in text_of(first)
    assert "Access request" in text_of(first)

    web.chat_postMessage(
        channel="C2",
        text="with metadata",
        metadata={"event_type": "review", "event_payload": {"id": 42}},
    )
    assert slack.messages("C2")[0].metadata == {"event_type": "review", "event_payload": {"id": 42}}


@pytest.mark.parametrize(
    ("blocks", "text"),
    [
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}], "t"),
        ([{"type": "header", "text": plain("x" * 151)}], "t"),
        (
            [
                {
                    "type": "actions",
                    "elements": [dict(review_card()[2]["elements"][0], value="v" * 2001)],
                }
            ],
            "t",
        ),
        (
            [
                {
                    "type": "actions",
                    "elements": [dict(review_card()[2]["elements"][0], action_id="a" * 256)],
                }
            ],
            "t",
        ),
        ([{"type": "divider"}] * 51, "t"),
        ("not json", "t"),
        (None, "x" * 40_001),
    ],
    ids=["section", "header", "value", "action_id", "count", "json", "text"],
)
def test_cards_slack_would_refuse_are_refused_and_not_recorded(slack, web, blocks, text):
    arguments: dict[str, Any] = {"channel": "C1", "text": text}
    if blocks is not None:
        arguments["blocks"] = blocks if isinstance(blocks, str) else json.dumps(blocks)
    with pytest.raises(SlackApiError) as refused:
        web.api_call("chat.postMessage", data=arguments)
    assert refused.value.response["error"] == "invalid_blocks"
    assert refused.value.response["response_metadata"]["messages"]
    assert slack.messages() == []
    assert slack.calls[-1].error == "invalid_blocks"


def test_chat_update_keeps_history_and_refuses_unknown_messages(slack, web):
    posted = web.chat_postMessage(channel="C1", text="pending", blocks=review_card())
    web.chat_update(channel="C1", ts=posted["ts"], text="approved", blocks=review_card()[:2])
    web.chat_update(channel="C1", ts=posted["ts"], text="approved by ada")

    message = slack.message("C1", posted["ts"])
    assert message.update_count == 2
    assert message.text == "approved by ada"
    assert message.blocks == review_card()[:2]  # chat.update without blocks keeps them
    assert message.history == [("pending", review_card()), ("approved", review_card()[:2])]
    assert message.updated_at is not None
    assert message.updated_at >= message.posted_at
    assert buttons(message) == []
    with pytest.raises(LookupError, match="approve"):
        slack.click(ADA, message, "approve")

    with pytest.raises(SlackApiError) as unknown:
        web.chat_update(channel="C1", ts="1.000001", text="x")
    assert unknown.value.response["error"] == "message_not_found"
    with pytest.raises(SlackApiError) as too_big:
        web.chat_update(channel="C1", ts=posted["ts"], text="x", blocks=[{"type": "divider"}] * 51)
    assert too_big.value.response["error"] == "invalid_blocks"
    assert slack.message("C1", posted["ts"]).update_count == 2


def test_rate_limits_on_demand_reach_the_client_and_its_retry_handler(slack, web):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    with pytest.raises(SlackApiError) as limited:
        web.chat_postMessage(channel="C1", text="hi")
    assert limited.value.response.status_code == 429
    assert limited.value.response["error"] == "ratelimited"
    assert limited.value.response.headers["Retry-After"] == "1"
    assert slack.messages() == []

    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    patient = WebClient(
        token=BOT, base_url=slack.base_url, retry_handlers=[RateLimitErrorRetryHandler()]
    )
    started = time.monotonic()
    assert patient.chat_postMessage(channel="C1", text="hi")["ok"]
    assert time.monotonic() - started >= 1
    assert [message.text for message in slack.messages()] == ["hi"]
    assert [call.status for call in slack.calls_to("chat.postMessage")] == [429, 429, 200]


def test_server_errors_and_error_answers_on_demand(slack, web):
    slack.fail_next("chat.postMessage", status=500, times=2)
    for _ in range(2):
        with pytest.raises(SlackApiError) as failed:
            web.chat_postMessage(channel="C1", text="hi")
        assert failed.value.response.status_code == 500
    assert web.chat_postMessage(channel="C1", text="hi")["ok"]

    slack.fail_next("users.info", error="invalid_auth")
    with pytest.raises(SlackApiError) as refused:
        web.users_info(user=ADA)
    assert refused.value.response.status_code == 200
    assert refused.value.response["error"] == "invalid_auth"
    assert [call.status for call in slack.calls_to("chat.postMessage")] == [500, 500, 200]


def test_channel_pacing_refuses_bursts_with_retry_after(slack, web):
    slack.pace_channels(messages_per_second=1.0, burst=1)
    web.chat_postMessage(channel="C1", text="first")
    with pytest.raises(SlackApiError) as paced:
        web.chat_postMessage(channel="C1", text="too soon")
    assert paced.value.response.status_code == 429
    assert int(paced.value.response.headers["Retry-After"]) >= 1
    web.chat_postMessage(channel="C2", text="another channel is fine")
    assert slack.pacing_violations == 1
    assert [m.text for m in slack.messages()] == ["first", "another channel is fine"]

    slack.pace_channels(None)
    web.chat_postMessage(channel="C1", text="pacing off")
    assert slack.pacing_violations == 1


def test_users_channels_dms_and_ephemerals(slack, web):
    user = web.users_info(user=ADA)["user"]
    assert user["id"] == ADA
    assert user["profile"]["email"] == "ada@example.com"
    assert user["real_name"] == "Ada Lovelace"
    assert user["is_bot"] is False
    with pytest.raises(SlackApiError) as unknown:
        web.users_info(user="U999")
    assert unknown.value.response["error"] == "user_not_found"

    dm = web.conversations_open(users=ADA)["channel"]["id"]
    assert dm == web.conversations_open(users=[ADA])["channel"]["id"]
    web.chat_postMessage(channel=dm, text="your request")
    assert [m.text for m in slack.dms(ADA)] == ["your request"]
    assert slack.dms("U200") == []

    answer = web.chat_postEphemeral(channel="C1", user=ADA, text="only you", blocks=review_card())
    (ephemeral,) = slack.ephemerals(ADA)
    assert ephemeral["message_ts"] == answer["message_ts"]
    assert (ephemeral["channel"], ephemeral["text"]) == ("C1", "only you")

    slack.remove_channel("C1")
    with pytest.raises(SlackApiError) as gone:
        web.chat_postMessage(channel="C1", text="hi")
    assert gone.value.response["error"] == "channel_not_found"
    with pytest.raises(SlackApiError) as nowhere:
        web.chat_postMessage(channel="Dnope", text="hi")
    assert nowhere.value.response["error"] == "channel_not_found"


def test_views_need_a_trigger_the_server_issued(slack, web):
    with pytest.raises(SlackApiError) as invalid:
        web.views_open(trigger_id="123.456.abc", view=REQUEST_FORM)
    assert invalid.value.response["error"] == "invalid_trigger_id"

    published = web.views_publish(
        user_id=ADA, view={"type": "home", "blocks": [{"type": "divider"}]}
    )
    assert published["view"]["id"].startswith("V")
    assert slack.home_view(ADA)["blocks"] == [{"type": "divider"}]
    with pytest.raises(SlackApiError) as too_many:
        web.views_publish(user_id=ADA, view={"type": "home", "blocks": [{"type": "divider"}] * 101})
    assert too_many.value.response["error"] == "invalid_blocks"


def test_wait_for_explains_what_it_waited_for(slack):
    with pytest.raises(TimeoutError, match="a message in C9"):
        slack.wait_for(lambda: slack.messages("C9"), timeout=0.1, message="a message in C9")


def test_scopes_are_told_by_auth_test_and_enforced(slack):
    slack.add_app(
        bot_token="xoxb-narrow",
        app_token="xapp-1-A0002-narrow",
        app_id="A0002",
        bot_scopes=["chat:write", "commands"],
    )
    narrow = WebClient(token="xoxb-narrow", base_url=slack.base_url)

    granted = narrow.auth_test()
    assert granted.headers["x-oauth-scopes"] == "chat:write,commands"
    assert narrow.chat_postMessage(channel="C1", text="a card")["ok"] is True
    with pytest.raises(SlackApiError) as refused:
        narrow.conversations_open(users=ADA)
    assert refused.value.response["error"] == "missing_scope"
    assert refused.value.response["needed"] == "im:write"
    assert refused.value.response["provided"] == "chat:write,commands"


def test_a_channel_without_the_bot_refuses_its_posts(slack, web):
    slack.remove_bot_from_channel("C1")

    for post in (
        lambda: web.chat_postMessage(channel="C1", text="a card"),
        lambda: web.chat_postEphemeral(channel="C1", user=ADA, text="only you"),
    ):
        with pytest.raises(SlackApiError) as refused:
            post()
        assert refused.value.response["error"] == "not_in_channel"
    assert slack.messages("C1") == []
    assert web.chat_postMessage(channel="C2", text="elsewhere")["ok"] is True


def test_a_slow_method_answers_late_once(slack, web):
    slack.delay_next("users.info", 0.3)

    started = time.monotonic()
    web.users_info(user=ADA)
    slow = time.monotonic() - started
    started = time.monotonic()
    web.users_info(user=ADA)
    fast = time.monotonic() - started

    assert slow >= 0.3
    assert fast < 0.3
