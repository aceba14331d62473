"""A Slack workspace on loopback that speaks Slack's wire protocols, for tests and benchmarks.

The real slack_sdk / slack_bolt clients talk to it through their ``base_url``
(``WebClient(token=..., base_url=server.base_url)``):

* the Web API (``POST /api/{method}``, form or JSON bodies) with Slack's answers and errors, block
  checks, rate limits on demand and optional per-channel pacing;
* Socket Mode: ``apps.connections.open`` hands out a single-use WebSocket URL; the server says
  hello, sends envelopes, waits for acks and can ask the app to reconnect;
* signed HTTP requests to an app's request URL (interactivity, slash commands, events);
* response URLs (``/response/<id>``), applied to the conversation as Slack does.

Tests act as users with :meth:`SlackServer.click`, :meth:`SlackServer.submit_view`,
:meth:`SlackServer.slash_command` and :meth:`SlackServer.open_app_home`, and read what the app did
with :meth:`SlackServer.messages` and friends. Every public method is synchronous and thread-safe;
acting methods have a ``submit_*`` twin returning a :class:`concurrent.futures.Future`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Self

import httpx
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from testing.slack.acting import ActingUsers
from testing.slack.background import BackgroundServer

JSONDict = dict[str, Any]


class SlackServer(ActingUsers):
    """A Slack workspace on 127.0.0.1 for the real Slack clients (see the module docstring).

    ``trigger_ttl`` is how long a trigger_id stays valid (Slack: 3 s; None: forever),
    ``ack_timeout`` how long to wait for an app's ack (Slack: 3 s) and ``connect_timeout`` how
    long a delivery waits for a Socket Mode connection of the app.
    """

    def start(self) -> Self:
        if self._background is not None:
            raise RuntimeError("the Slack server is already running")
        app = Starlette(
            routes=[
                Route("/api/{method}", self._api_endpoint, methods=["GET", "POST"]),
                Route("/response/{response_id}", self._response_endpoint, methods=["POST"]),
                WebSocketRoute("/link/", self._socket_endpoint),
                WebSocketRoute("/link", self._socket_endpoint),
            ],
            lifespan=self._lifespan,
        )
        self._background = BackgroundServer(app, name="slack-server").start()
        return self

    def stop(self) -> None:
        background, self._background = self._background, None
        if background is None:
            return
        try:
            background.loop_thread.run(self._close_connections(), timeout=10)
        finally:
            background.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._http = httpx.AsyncClient(trust_env=False)
        try:
            yield
        finally:
            http, self._http = self._http, None
            await http.aclose()
