"""Socket Mode and signed HTTP requests: how the workspace reaches an app."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlencode

import httpx
from starlette.websockets import WebSocket

from testing.slack.records import (
    SLACKBOT_USER_AGENT,
    Ack,
    AppRecord,
    AppRoute,
    SocketConnection,
    form_value,
)
from testing.slack.web_api import WebApi

JSONDict = dict[str, Any]


# How long an app gets to replace a connection it was told to leave (Slack gives ~10 s).
DISCONNECT_GRACE_SECONDS = 5.0


def sign_request(signing_secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


class SocketMode(WebApi):
    """Delivering to the app: Socket Mode envelopes (hello, acks, disconnects) or signed HTTP."""

    def socket_connections(self, app_token: str) -> int:
        """Open Socket Mode connections of the app owning ``app_token``."""
        with self._cond:
            return len(self._live_connections(self._app_for_token(app_token).app_id))

    def socket_connections_with(self, app_token: str) -> int:
        """Open Socket Mode connections opened with this very app token (of rotated ones)."""
        with self._cond:
            app_id = self._app_for_token(app_token).app_id
            live = self._live_connections(app_id)
            return sum(1 for connection in live if connection.app_token == app_token)

    def wait_connected(self, app_token: str, timeout: float = 10.0, count: int = 1) -> None:
        self.wait_for(
            lambda: self.socket_connections(app_token) >= count,
            timeout,
            f"{count} Socket Mode connection(s) for {app_token}",
        )

    def disconnect_all(self, app_token: str, reason: str = "refresh_requested") -> None:
        """Send ``{"type": "disconnect"}`` to every connection of the app, then close them."""
        with self._cond:
            app = self._app_for_token(app_token)
            connections = self._live_connections(app.app_id)
            for connection in connections:
                connection.closing = True
            self._cond.notify_all()
        self._running.loop_thread.run(self._disconnect(connections, reason), timeout=10)

    async def _disconnect(self, connections: list[SocketConnection], reason: str) -> None:
        # Like Slack, announce the disconnect and leave the app time to open its new connection
        # and close the old one itself. Closing at once made the client's connection monitor
        # reconnect a second time, dropping envelopes already sent to the connection it replaced.
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "local"}}
        for connection in connections:
            with contextlib.suppress(Exception):
                await self._ws_send(connection, message)
        deadline = time.monotonic() + DISCONNECT_GRACE_SECONDS
        while time.monotonic() < deadline and any(c in self._connections for c in connections):
            await asyncio.sleep(0.01)
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.websocket.close(code=1000)

    async def _close_connections(self) -> None:
        for pending in self._pending_acks.values():
            if not pending.done():
                pending.set_exception(ConnectionError("the Slack server stopped"))
        with self._cond:
            connections = list(self._connections)
            for connection in connections:
                connection.closing = True
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.websocket.close(code=1001)

    # ---- delivery --------------------------------------------------------------------------------

    async def _deliver(
        self,
        app: AppRecord,
        kind: Literal["interactive", "slash_commands", "events_api"],
        payload: JSONDict,
        route: AppRoute,
        accepts_response_payload: bool,
        after: Callable[[Ack], None] | None = None,
    ) -> Ack:
        if route.via == "socket":
            # ``after`` runs as the ack arrives, as on Slack, before any later call of the app.
            return await self._deliver_socket(
                app.app_id, kind, payload, accepts_response_payload, after
            )
        if kind == "interactive":
            body = urlencode({"payload": json.dumps(payload)}).encode()
            content_type = "application/x-www-form-urlencoded"
        elif kind == "slash_commands":
            body = urlencode({k: form_value(v) for k, v in payload.items()}).encode()
            content_type = "application/x-www-form-urlencoded"
        else:
            body = json.dumps(payload).encode()
            content_type = "application/json"
        ack = await self._deliver_http(route, body, content_type)
        with self._cond:
            if after is not None:
                after(ack)
            self._cond.notify_all()
        return ack

    async def _pick_connection(self, app_id: str, deadline: float) -> SocketConnection:
        while True:
            with self._cond:
                live = self._live_connections(app_id)
                if live:
                    turn = next(self._round_robin.setdefault(app_id, itertools.count()))
                    return live[turn % len(live)]
            if time.monotonic() > deadline:
                raise ConnectionError(
                    f"no Socket Mode connection for app {app_id} after {self.connect_timeout} s"
                )
            await asyncio.sleep(0.01)

    async def _ws_send(self, connection: SocketConnection, message: JSONDict) -> None:
        async with connection.send_lock:
            await connection.websocket.send_text(json.dumps(message))

    async def _deliver_socket(
        self,
        app_id: str,
        kind: str,
        payload: JSONDict,
        accepts_response_payload: bool,
        on_ack: Callable[[Ack], None] | None = None,
    ) -> Ack:
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": 0,
            "retry_reason": "",
        }
        ack_future: asyncio.Future[JSONDict] = asyncio.get_running_loop().create_future()
        self._pending_acks[envelope_id] = ack_future
        if on_ack is not None:
            self._ack_hooks[envelope_id] = on_ack
        deadline = time.monotonic() + self.connect_timeout
        try:
            while True:
                connection = await self._pick_connection(app_id, deadline)
                started = time.monotonic()
                try:
                    await self._ws_send(connection, envelope)
                    break
                except Exception:
                    # The connection went away under us (a refresh): try another one.
                    connection.closing = True
            try:
                reply = await asyncio.wait_for(ack_future, self.ack_timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"the app did not acknowledge {kind} envelope {envelope_id} "
                    f"within {self.ack_timeout} s"
                ) from None
        finally:
            self._pending_acks.pop(envelope_id, None)
            self._ack_hooks.pop(envelope_id, None)
        elapsed = time.monotonic() - started
        ack_payload = reply.get("payload")
        return Ack(
            envelope_id, ack_payload if isinstance(ack_payload, dict) else None, 200, elapsed
        )

    async def _deliver_http(self, route: AppRoute, body: bytes, content_type: str) -> Ack:
        assert route.url is not None
        if self._http is None:
            raise RuntimeError("the Slack server is not running")
        timestamp = str(int(time.time()) if route.timestamp is None else route.timestamp)
        signature = route.signature or sign_request(route.signing_secret, timestamp, body)
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
            "User-Agent": SLACKBOT_USER_AGENT,
        }
        started = time.monotonic()
        try:
            response = await self._http.post(
                route.url, content=body, headers=headers, timeout=self.ack_timeout
            )
        except httpx.TimeoutException:
            raise TimeoutError(f"{route.url} did not answer within {self.ack_timeout} s") from None
        elapsed = time.monotonic() - started
        text = response.text
        payload: JSONDict | None = None
        if text.strip():
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = {"text": text} if response.status_code == 200 else None
            payload = parsed if isinstance(parsed, dict) else None
        return Ack(None, payload, response.status_code, elapsed, text)

    # ---- WebSocket endpoint ----------------------------------------------------------------------

    async def _socket_endpoint(self, websocket: WebSocket) -> None:
        ticket = websocket.query_params.get("ticket", "")
        with self._cond:
            owner = self._tickets.pop(ticket, None)
        if owner is None:
            await websocket.close(code=1008)
            return
        app_id, app_token = owner
        await websocket.accept()
        connection = SocketConnection(websocket, app_id, app_token, asyncio.Lock())
        with self._cond:
            self._connections.append(connection)
            count = len(self._live_connections(app_id))
        hello = {
            "type": "hello",
            "num_connections": count,
            "debug_info": {"host": "local", "approximate_connection_time": 18060},
            "connection_info": {"app_id": app_id},
        }
        try:
            await self._ws_send(connection, hello)
            with self._cond:
                self._cond.notify_all()
            while True:
                received = await websocket.receive()
                if received["type"] == "websocket.disconnect":
                    break
                raw = received.get("text")
                if raw is None:
                    raw = (received.get("bytes") or b"").decode()
                self._on_socket_message(raw)
        except Exception:
            if not connection.closing:
                raise
        finally:
            with self._cond:
                connection.closing = True
                self._connections.remove(connection)
                self._cond.notify_all()

    def _on_socket_message(self, raw: str) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        envelope_id = str(message.get("envelope_id"))
        pending = self._pending_acks.get(envelope_id)
        if pending is None or pending.done():
            return
        hook = self._ack_hooks.pop(envelope_id, None)
        if hook is not None:
            answer = message.get("payload")
            with self._cond:
                hook(Ack(envelope_id, answer if isinstance(answer, dict) else None, 200, 0.0))
                self._cond.notify_all()
        pending.set_result(message)
