"""Fixtures for the loopback Slack's own tests: the server, a Web API client, a Bolt app."""

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from testing.slack import (
    BackgroundServer,
    LoopThread,
    SlackServer,
)
from tests.testing.slack.support import ADA, APP, BOT, SIGNING_SECRET, BoltApp, build_bolt_app


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
