"""What the loopback Slack workspace records and hands out: messages, calls, acks, apps,
users, connections, views, and the Block Kit limits it enforces."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

from starlette.websockets import WebSocket

JSONDict = dict[str, Any]


T = TypeVar("T")
Via = Literal["socket", "http"]


class Delivery(TypedDict, total=False):
    """How an action reaches the app: over Socket Mode (default) or as a signed HTTP request.

    ``app_token`` / ``team_id`` pick the app; ``http_url`` and ``signing_secret`` are for
    ``via="http"``, where ``timestamp`` and ``signature`` override the computed headers (to send
    a stale or forged request).
    """

    via: Via
    http_url: str | None
    signing_secret: str | None
    app_token: str | None
    team_id: str | None
    timestamp: str | int | None
    signature: str | None


# Limits Slack enforces (https://docs.slack.dev/reference/block-kit/...).
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_TEXT_ARGUMENT = 40_000
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_SECTION_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_BUTTON_URL = 3000
MAX_ACTION_ID = 255
MAX_BLOCK_ID = 255
MAX_ACTIONS_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_VIEW_TITLE = 24
MAX_PRIVATE_METADATA = 3000
MAX_CALLBACK_ID = 255

SLACKBOT_USER_AGENT = "Slackbot 1.0 (+https://api.slack.com/robots)"
DEFAULT_BOT_TOKEN = "xoxb-0001-test"
DEFAULT_APP_TOKEN = "xapp-1-A0001-test"
# Every bot scope the workspace knows of; an app is granted all of them unless a test says less.
BOT_SCOPES = frozenset(
    {
        "chat:write",
        "im:write",
        "commands",
        "users:read",
        "users:read.email",
        "channels:read",
        "channels:history",
        "groups:history",
    }
)
# The scope each Web API method needs of a bot token (methods not listed need none).
METHOD_SCOPES = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.open": "im:write",
    "conversations.info": "channels:read",
    "users.info": "users:read",
    "users.lookupByEmail": "users:read.email",
}
# Slack: a response_url works five times within thirty minutes.
RESPONSE_URL_USES = 5
RESPONSE_URL_TTL_SECONDS = 30 * 60


# --------------------------------------------------------------------------------------------
# Public records


@dataclass
class Message:
    """A message as the server stores it (the latest version; older ones are in ``history``)."""

    channel: str
    ts: str
    text: str
    blocks: list[JSONDict]
    metadata: JSONDict | None
    thread_ts: str | None
    user: str
    posted_at: float
    updated_at: float | None = None
    history: list[tuple[str, list[JSONDict]]] = field(default_factory=list)
    update_count: int = 0
    app_id: str = ""
    bot_id: str = ""
    team_id: str = ""
    deleted: bool = False

    def to_dict(self) -> JSONDict:
        """The message as Slack shows it in API answers and interaction payloads."""
        data: JSONDict = {
            "type": "message",
            "user": self.user,
            "ts": self.ts,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": self.text,
            "team": self.team_id,
            "blocks": copy.deepcopy(self.blocks),
        }
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if self.metadata:
            data["metadata"] = copy.deepcopy(self.metadata)
        if self.update_count:
            data["edited"] = {"user": self.user, "ts": self.ts}
        return data


@dataclass(frozen=True)
class Call:
    """One Web API call as the server received it (``params`` without the token)."""

    method: str
    params: JSONDict
    token: str | None
    time: float
    status: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclass(frozen=True)
class Ack:
    """The app's answer to something delivered to it.

    ``envelope_id`` is None for HTTP; ``payload`` is the ack's payload (Socket Mode) or the parsed
    response body (HTTP); ``status`` is 200 for Socket Mode; ``elapsed`` is seconds from send to
    ack; ``body`` is the raw HTTP response body ("" for Socket Mode).
    """

    envelope_id: str | None
    payload: JSONDict | None
    status: int
    elapsed: float
    body: str = ""


# --------------------------------------------------------------------------------------------
# Internal records


class ApiError(Exception):
    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        messages: list[str] | None = None,
        extra: JSONDict | None = None,
    ) -> None:
        super().__init__(error)
        self.extra = extra or {}
        self.error = error
        self.status = status
        self.headers = headers or {}
        self.messages = messages or []

    def body(self) -> JSONDict:
        body: JSONDict = {"ok": False, "error": self.error, **self.extra}
        if self.messages:
            body["response_metadata"] = {"messages": self.messages}
        return body


@dataclass
class AppRecord:
    app_id: str
    team_id: str
    team_name: str
    bot_user_id: str
    bot_id: str
    bot_name: str
    signing_secret: str
    verification_token: str
    request_url: str | None
    bot_tokens: list[str] = field(default_factory=list)
    app_tokens: list[str] = field(default_factory=list)

    @property
    def team_domain(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.team_name.lower()).strip("-") or "workspace"


@dataclass
class UserRecord:
    user_id: str
    name: str
    email: str
    real_name: str
    team_id: str


@dataclass
class SocketConnection:
    websocket: WebSocket
    app_id: str
    app_token: str
    send_lock: asyncio.Lock
    closing: bool = False


@dataclass
class Trigger:
    user_id: str
    app_id: str
    issued_at: float
    used: bool = False


@dataclass
class ResponseTarget:
    app_id: str
    user_id: str
    channel_id: str
    message_ts: str | None
    is_ephemeral: bool
    issued_at: float = field(default_factory=time.monotonic)
    uses: int = 0


@dataclass
class ViewRecord:
    view: JSONDict
    user_id: str
    app_id: str
    is_open: bool = True


@dataclass
class Failure:
    status: int
    error: str
    retry_after: int
    times: int
    after_handling: bool = False  # the call took effect; only its answer is the error


@dataclass
class Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class AppRoute:
    via: Via
    url: str | None
    signing_secret: str
    timestamp: str | int | None
    signature: str | None


@dataclass(frozen=True)
class ApiCall:
    app: AppRecord
    token: str
    params: JSONDict


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes"}
    return bool(value)


def new_id(prefix: str, length: int = 10) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
