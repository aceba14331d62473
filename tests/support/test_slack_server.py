"""The loopback Slack server, driven by the real slack_sdk and slack_bolt clients."""

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.slack_server import (
    BackgroundServer,
    LoopThread,
    Message,
    SlackServer,
    buttons,
    sign_request,
    text_of,
)

BOT = "xoxb-0001-test"
APP = "xapp-1-A0001-test"
SIGNING_SECRET = "test-signing-secret"
ADA = "U100"


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def review_card(request_id: str = "42") -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": plain("Access request")},
        {
            "type": "section",
            "block_id": "summary",
            "text": {"type": "mrkdwn", "text": "*ada* asks for *db-prod*"},
        },
        {
            "type": "actions",
            "block_id": "decision",
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve",
                    "text": plain("Approve"),
                    "style": "primary",
                    "value": request_id,
                },
                {
                    "type": "button",
                    "action_id": "reject",
                    "text": plain("Reject"),
                    "style": "danger",
                    "value": request_id,
                    "confirm": {
                        "title": plain("Reject?"),
                        "text": plain("The request will be closed."),
                        "confirm": plain("Reject"),
                        "deny": plain("Cancel"),
                    },
                },
                {"type": "button", "action_id": "open_form", "text": plain("Ask for more")},
            ],
        },
    ]


REQUEST_FORM = {
    "type": "modal",
    "callback_id": "request_form",
    "private_metadata": "42",
    "title": plain("Request access"),
    "submit": plain("Send"),
    "close": plain("Cancel"),
    "blocks": [
        {
            "type": "input",
            "block_id": "reason",
            "label": plain("Why?"),
            "element": {"type": "plain_text_input", "action_id": "reason"},
        },
        {
            "type": "input",
            "block_id": "until",
            "label": plain("Until"),
            "element": {"type": "timepicker", "action_id": "until", "initial_time": "17:00"},
        },
        {
            "type": "input",
            "block_id": "duration",
            "label": plain("For"),
            "element": {
                "type": "static_select",
                "action_id": "duration",
                "options": [
                    {"text": plain("One hour"), "value": "1h"},
                    {"text": plain("A day"), "value": "8h"},
                ],
            },
        },
    ],
}


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer() as server:
        server.add_app(bot_token=BOT, app_token=APP, signing_secret=SIGNING_SECRET)
        server.add_user(ADA, "ada", "ada@example.com", real_name="Ada Lovelace")
        yield server


@pytest.fixture
def web(slack: SlackServer) -> WebClient:
    return WebClient(token=BOT, base_url=slack.base_url)


@pytest.fixture
def app_loop() -> Iterator[LoopThread]:
    """The loop the Bolt app runs on, as it would in its own process."""
    loop = LoopThread("bolt-app").start()
    yield loop
    loop.stop()


@dataclass
class BoltApp:
    app: AsyncApp
    handler: AsyncSocketModeHandler
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def seen_kinds(self) -> list[str]:
        return [kind for kind, _ in self.seen]


def build_bolt_app(client: AsyncWebClient, seen: list[tuple[str, dict[str, Any]]]) -> AsyncApp:
    app = AsyncApp(client=client, signing_secret=SIGNING_SECRET)

    @app.action("approve")
    async def approve(ack, body, respond):
        await ack()
        seen.append(("approve", body))
        await respond(
            replace_original=True,
            text="Approved",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "Approved by ada"}}],
        )

    @app.action("reject")
    async def reject(ack, body):
        await ack()
        seen.append(("reject", body))

    @app.action("open_form")
    async def open_form(ack, body, client):
        await ack()
        opened = await client.views_open(trigger_id=body["trigger_id"], view=REQUEST_FORM)
        seen.append(("opened", opened.data))

    @app.view("request_form")
    async def submitted(ack, body, view):
        seen.append(("view", body))
        if not view["state"]["values"]["reason"]["reason"]["value"]:
            await ack(response_action="errors", errors={"reason": "Say why you need it"})
        else:
            await ack()

    @app.command("/accessgate")
    async def command(ack, body):
        seen.append(("command", body))
        await ack(text=f"Looking up {body['text']}")

    @app.event("app_home_opened")
    async def home(event, client):
        seen.append(("home", event))
        await client.views_publish(
            user_id=event["user"],
            view={"type": "home", "blocks": [{"type": "section", "text": plain("Your requests")}]},
        )

    return app


@pytest.fixture
def bolt(slack: SlackServer, app_loop: LoopThread) -> Iterator[BoltApp]:
    """A Bolt app connected to the server over Socket Mode (built on the app's own loop)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    async def connect_app() -> BoltApp:
        app = build_bolt_app(AsyncWebClient(token=BOT, base_url=slack.base_url), seen)
        handler = AsyncSocketModeHandler(app, APP)
        untyped: Any = handler  # slack_bolt leaves these methods unannotated
        await untyped.connect_async()
        return BoltApp(app, handler, seen)

    connected = app_loop.run(connect_app())
    slack.wait_connected(APP, timeout=5)
    yield connected
    untyped: Any = connected.handler
    app_loop.run(untyped.close_async())


@pytest.fixture
def signed_endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An app's request URL that checks Slack's signature with slack_sdk's SignatureVerifier."""
    received: list[dict[str, Any]] = []
    verifier = SignatureVerifier(SIGNING_SECRET)

    async def events(request: Request) -> Response:
        body = await request.body()
        valid = verifier.is_valid_request(body, dict(request.headers))
        received.append(
            {"valid": valid, "content_type": request.headers["content-type"], "body": body}
        )
        if not valid:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        if request.headers["content-type"] == "application/x-www-form-urlencoded":
            form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
            if "payload" in form and json.loads(form["payload"])["type"] == "view_submission":
                errors = {"reason": "Too short"}
                return JSONResponse({"response_action": "errors", "errors": errors})
        return Response(status_code=200)

    app = Starlette(routes=[Route("/slack/events", events, methods=["POST"])])
    with BackgroundServer(app, name="app-endpoint") as server:
        yield f"{server.url}/slack/events", received


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


# ---- Socket Mode ----------------------------------------------------------------------------


def test_socket_mode_protocol_on_a_raw_websocket(slack, web):
    url = web.apps_connections_open(app_token=APP)["url"]
    assert url.startswith(f"ws://127.0.0.1:{slack.port}/link/?ticket=")
    assert url.endswith("&app_id=A0001")
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])

    with connect(url, open_timeout=5) as websocket:
        hello = json.loads(websocket.recv(timeout=5))
        assert hello == {
            "type": "hello",
            "num_connections": 1,
            "debug_info": {"host": "local", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0001"},
        }
        assert slack.socket_connections(APP) == 1

        future = slack.submit_click(ADA, message, "reject")
        envelope = json.loads(websocket.recv(timeout=5))
        assert envelope["type"] == "interactive"
        assert uuid.UUID(envelope["envelope_id"])
        assert envelope["accepts_response_payload"] is False
        assert (envelope["retry_attempt"], envelope["retry_reason"]) == (0, "")
        payload = envelope["payload"]
        assert payload["type"] == "block_actions"
        assert payload["user"] == {"id": ADA, "username": "ada", "name": "ada", "team_id": "T0001"}
        assert payload["api_app_id"] == "A0001"
        assert payload["container"] == {
            "type": "message",
            "message_ts": posted["ts"],
            "channel_id": "C1",
            "is_ephemeral": False,
        }
        assert payload["team"] == {"id": "T0001", "domain": "acme"}
        assert payload["enterprise"] is None
        assert payload["is_enterprise_install"] is False
        assert payload["channel"]["id"] == "C1"
        assert payload["message"]["blocks"] == review_card()
        assert payload["message"]["ts"] == posted["ts"]
        assert payload["state"] == {"values": {}}
        assert payload["response_url"].startswith(f"http://127.0.0.1:{slack.port}/response/")
        assert payload["trigger_id"]
        (action,) = payload["actions"]
        assert action["action_id"] == "reject"
        assert action["block_id"] == "decision"
        assert (action["value"], action["style"], action["type"]) == ("42", "danger", "button")
        assert action["text"] == plain("Reject")

        websocket.send(json.dumps({"envelope_id": envelope["envelope_id"], "payload": {"x": 1}}))
        ack = future.result(timeout=5)
        assert ack.envelope_id == envelope["envelope_id"]
        assert ack.payload == {"x": 1}
        assert ack.status == 200
        assert ack.elapsed < 3

        slack.ack_timeout = 0.2
        with pytest.raises(TimeoutError, match="did not acknowledge"):
            slack.click(ADA, message, "approve")

    slack.wait_for(lambda: slack.socket_connections(APP) == 0, timeout=5)
    with pytest.raises(InvalidStatus):
        connect(url, open_timeout=5)  # a ticket is single use


def test_bolt_app_over_socket_mode_handles_clicks_modals_commands_and_home(slack, web, bolt):
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])

    ack = slack.click(ADA, message, "open_form")
    assert ack.elapsed < 3
    slack.wait_for(lambda: slack.open_views(ADA), timeout=5, message="the modal opens")
    (modal,) = slack.open_views(ADA)
    assert modal["callback_id"] == "request_form"
    opened = dict(bolt.seen)["opened"]
    assert opened["view"]["id"] == modal["id"]

    refused = slack.submit_view(ADA, modal["id"], {"duration": {"duration": "8h"}})
    assert refused.payload == {
        "response_action": "errors",
        "errors": {"reason": "Say why you need it"},
    }
    assert [view["id"] for view in slack.open_views(ADA)] == [modal["id"]]
    state = dict(bolt.seen)["view"]["view"]["state"]["values"]
    assert state == {
        "reason": {"reason": {"type": "plain_text_input", "value": None}},
        "until": {"until": {"type": "timepicker", "selected_time": "17:00"}},
        "duration": {
            "duration": {
                "type": "static_select",
                "selected_option": {"text": plain("A day"), "value": "8h"},
            }
        },
    }
    with pytest.raises(LookupError, match="no block"):
        slack.submit_view(ADA, modal["id"], {"nope": {"nope": "x"}})

    accepted = slack.submit_view(
        ADA, modal["id"], {"reason": {"reason": "on call"}, "until": {"until": "09:30"}}
    )
    assert accepted.payload is None
    assert slack.open_views(ADA) == []
    submitted = [body for kind, body in bolt.seen if kind == "view"][-1]
    assert submitted["view"]["private_metadata"] == "42"
    assert submitted["view"]["state"]["values"]["until"]["until"]["selected_time"] == "09:30"

    command = slack.slash_command(ADA, "status 42")
    assert command.payload == {"text": "Looking up status 42"}
    command_body = dict(bolt.seen)["command"]
    assert (command_body["command"], command_body["text"]) == ("/accessgate", "status 42")
    assert command_body["channel_id"] == "C0GENERAL"

    slack.open_app_home(ADA)
    slack.wait_for(lambda: slack.home_view(ADA) is not None, timeout=5)
    assert text_of(slack.home_view(ADA)) == "Your requests"

    approved = slack.click(ADA, message, "approve", value="42")
    assert approved.payload is None
    slack.wait_for(lambda: slack.message("C1", posted["ts"]).update_count == 1, timeout=5)
    updated = slack.message("C1", posted["ts"])
    assert updated.text == "Approved"
    assert buttons(updated) == []
    (response,) = slack.responses
    assert response["body"]["replace_original"] is True
    assert response["status"] == 200
    with pytest.raises(LookupError):
        slack.click(ADA, updated, "approve")


def test_many_clicks_at_once_and_a_refresh(slack, web, bolt):
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])
    futures = [slack.submit_click(f"U{n:03d}", message, "reject") for n in range(50)]
    acks = [future.result(timeout=10) for future in futures]
    assert len({ack.envelope_id for ack in acks}) == 50
    assert max(ack.elapsed for ack in acks) < 3

    slack.disconnect_all(APP)
    slack.wait_for(
        lambda: (
            len(slack.calls_to("apps.connections.open")) == 2 and slack.socket_connections(APP) == 1
        ),
        timeout=5,
        message="the app reconnects",
    )
    assert slack.click(ADA, message, "reject").status == 200
    slack.add_app(app_token="xapp-1-A0001-rotated")
    assert slack.socket_connections("xapp-1-A0001-rotated") == 1  # same app, same connection


# ---- Signed HTTP ----------------------------------------------------------------------------


def test_signed_http_requests_pass_slack_sdk_signature_verifier(slack, web, signed_endpoint):
    url, received = signed_endpoint
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])

    ack = slack.click(
        ADA, message, "approve", via="http", http_url=url, signing_secret=SIGNING_SECRET
    )
    assert (ack.status, ack.envelope_id, ack.payload) == (200, None, None)
    click = received[-1]
    assert click["valid"] is True
    assert click["content_type"] == "application/x-www-form-urlencoded"
    payload = json.loads(parse_qs(click["body"].decode())["payload"][0])
    assert payload["actions"][0]["action_id"] == "approve"

    stale = slack.click(
        ADA, message, "approve", via="http", http_url=url, timestamp=int(time.time()) - 600
    )
    assert stale.status == 401
    forged = slack.click(
        ADA, message, "approve", via="http", http_url=url, signature="v0=" + "0" * 64
    )
    assert forged.status == 401
    wrong_secret = slack.click(
        ADA, message, "approve", via="http", http_url=url, signing_secret="not-the-secret"
    )
    assert wrong_secret.status == 401
    assert [request["valid"] for request in received] == [True, False, False, False]

    def last_payload() -> dict[str, Any]:
        return json.loads(parse_qs(received[-1]["body"].decode())["payload"][0])

    web.views_publish(user_id=ADA, view={"type": "home", "blocks": review_card()[2:]})
    home_view = slack.home_view(ADA)
    assert slack.click(ADA, home_view, "approve", via="http", http_url=url).status == 200
    assert last_payload()["container"] == {"type": "view", "view_id": home_view["id"]}
    assert last_payload()["view"]["blocks"] == review_card()[2:]

    web.chat_postEphemeral(channel="C1", user=ADA, text="only you", blocks=review_card())
    (ephemeral,) = slack.ephemerals(ADA)
    assert slack.click(ADA, ephemeral, "reject", via="http", http_url=url).status == 200
    assert last_payload()["container"]["is_ephemeral"] is True
    assert last_payload()["container"]["message_ts"] == ephemeral["message_ts"]

    command = slack.slash_command(ADA, "list", via="http", http_url=url)
    assert command.status == 200
    form = parse_qs(received[-1]["body"].decode())
    assert (form["command"], form["text"], form["is_enterprise_install"]) == (
        ["/accessgate"],
        ["list"],
        ["false"],
    )

    home = slack.open_app_home(ADA, via="http", http_url=url)
    assert home.status == 200
    event = json.loads(received[-1]["body"])
    assert received[-1]["content_type"] == "application/json"
    assert event["event"]["type"] == "app_home_opened"
    assert event["authorizations"][0] == {
        "enterprise_id": None,
        "team_id": "T0001",
        "user_id": "U0BOT",
        "is_bot": True,
        "is_enterprise_install": False,
    }

    body = received[-1]["body"]
    timestamp = str(int(time.time()))
    assert SignatureVerifier(SIGNING_SECRET).is_valid(
        body, timestamp, sign_request(SIGNING_SECRET, timestamp, body)
    )


def test_bolt_app_over_signed_http(slack, web):
    seen: list[tuple[str, dict[str, Any]]] = []
    app = build_bolt_app(AsyncWebClient(token=BOT, base_url=slack.base_url), seen)
    handler = AsyncSlackRequestHandler(app)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    endpoint = Starlette(routes=[Route("/slack/events", events, methods=["POST"])])
    with BackgroundServer(endpoint, name="bolt-http") as server:
        url = f"{server.url}/slack/events"
        answer = slack.slash_command(ADA, "status 7", via="http", http_url=url)
        assert answer.status == 200
        assert answer.payload == {"text": "Looking up status 7"}

        stale = slack.slash_command(
            ADA, "status 7", via="http", http_url=url, timestamp=int(time.time()) - 600
        )
        assert stale.status == 401

        posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
        slack.click(ADA, slack.message("C1", posted["ts"]), "open_form", via="http", http_url=url)
        slack.wait_for(lambda: slack.open_views(ADA), timeout=5)
        (modal,) = slack.open_views(ADA)
        refused = slack.submit_view(ADA, modal, {}, via="http", http_url=url)
        assert refused.payload is not None
        assert refused.payload["response_action"] == "errors"
        assert len(slack.open_views(ADA)) == 1
    assert [kind for kind, _ in seen] == ["command", "opened", "view"]


def test_clicking_a_message_from_the_listing(slack, web, bolt):
    web.chat_postMessage(channel=ADA, text="review", blocks=review_card())
    (message,) = slack.dms(ADA)
    assert isinstance(message, Message)
    assert message.channel == SlackServer.dm_channel_id(ADA)
    assert slack.click(ADA, message, "reject").status == 200
