"""Limits on what one request may cost before anyone knows who sent it.

A body is refused with 413 as soon as its size is known: at once from ``Content-Length``, or,
for a body sent in chunks, at the first chunk past the limit. Nothing past the limit is read
into memory. A body that does not arrive in time is refused with 408, so a client sending one
byte a second cannot hold a connection and a worker. (A client slow to send its *headers* is
cut off by the server itself: see ``api.server``.)
"""

import json
import math
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class RequestLimits:
    """ASGI middleware: bodies larger than ``max_body_bytes`` get 413, slow bodies 408."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout_seconds: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_seconds = body_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await _refuse(send, 413, self._too_large())
            return
        guard = _BodyGuard(self, receive, send)
        await self.app(scope, guard.receive, guard.send)

    def _too_large(self) -> str:
        return f"the request body is larger than the limit of {self.max_body_bytes:,} bytes"


class _BodyGuard:
    """Counts the body as the app reads it; answers for the app when the body breaks a limit."""

    def __init__(self, limits: RequestLimits, receive: Receive, send: Send) -> None:
        self._limits = limits
        self._receive = receive
        self._send = send
        self._received = 0
        self._deadline = anyio.current_time() + limits.body_timeout_seconds
        self._response_started = False
        self._refused = False

    async def receive(self) -> Message:
        if self._refused:
            return {"type": "http.disconnect"}
        remaining = self._deadline - anyio.current_time()
        with anyio.move_on_after(max(remaining, 0)) as scope:
            message = await self._receive()
        if scope.cancelled_caught:
            return await self._give_up(408, "the request body did not arrive in time")
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._limits.max_body_bytes:
                return await self._give_up(413, self._limits._too_large())
            if not message.get("more_body", False):
                # The whole body is in: the deadline is for receiving it, not for the work.
                self._deadline = math.inf
        return message

    async def send(self, message: Message) -> None:
        if self._refused:
            return  # the client already has its answer; the app's own is dropped
        if message["type"] == "http.response.start":
            self._response_started = True
        await self._send(message)

    async def _give_up(self, status: int, text: str) -> Message:
        """Answer ``status`` (unless the app already answered) and tell the app to stop."""
        self._refused = True
        if not self._response_started:
            await _refuse(self._send, status, text)
        return {"type": "http.disconnect"}


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP parser refuses it before we are called
    return None


async def _refuse(send: Send, status: int, text: str) -> None:
    body = json.dumps({"message": text}, separators=(",", ":")).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The rest of the body is not read: the connection cannot carry another request.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
