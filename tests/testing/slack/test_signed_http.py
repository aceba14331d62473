"""Signed HTTP requests from the loopback Slack, checked by slack_sdk and served by slack_bolt."""

import json
import time
from typing import Any
from urllib.parse import parse_qs

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from testing.slack import (
    BackgroundServer,
    Message,
    SlackServer,
    sign_request,
)
from tests.testing.slack.support import ADA, BOT, SIGNING_SECRET, build_bolt_app, review_card

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
        # The server holds the view before views.open's answer reaches the app.
        slack.wait_for(lambda: "opened" in dict(seen), timeout=5)
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
