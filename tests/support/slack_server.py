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

import asyncio
import contextlib
import copy
import hashlib
import hmac
import itertools
import json
import math
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Self, TypedDict, TypeVar, Unpack
from urllib.parse import parse_qsl, urlencode

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp
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
# Card helpers


def _walk(node: Any) -> Iterator[JSONDict]:
    """Every dict inside ``node``, depth first, in document order."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _blocks_of(target: Any) -> list[JSONDict]:
    if isinstance(target, Message):
        return target.blocks
    if isinstance(target, list):
        return target
    if isinstance(target, dict):
        blocks = target.get("blocks")
        if isinstance(blocks, list):
            return blocks
        message = target.get("message")
        if isinstance(message, dict) and isinstance(message.get("blocks"), list):
            return list(message["blocks"])
    return []


def _plain(text_object: Any) -> str:
    if isinstance(text_object, dict):
        text = text_object.get("text")
        return text if isinstance(text, str) else ""
    return text_object if isinstance(text_object, str) else ""


def _auto_id(*parts: Any) -> str:
    """A stable id for a block or element that has none (Slack makes up a random one)."""
    digest = hashlib.sha1(json.dumps(parts, sort_keys=True).encode(), usedforsecurity=False)
    return digest.hexdigest()[:5]


def _block_id(index: int, block: JSONDict) -> str:
    block_id = block.get("block_id")
    return block_id if isinstance(block_id, str) and block_id else _auto_id(index, block)


def _action_id(element: JSONDict) -> str:
    action_id = element.get("action_id")
    return action_id if isinstance(action_id, str) and action_id else _auto_id(element)


def _buttons_with_blocks(blocks: list[JSONDict]) -> Iterator[tuple[str, JSONDict]]:
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        for node in _walk(block):
            if node is not block and node.get("type") == "button":
                yield _block_id(index, block), node


def buttons(target: Any) -> list[JSONDict]:
    """Every button on a card (a Message, a message/view dict, or a list of blocks)."""
    return [
        {
            "action_id": _action_id(element),
            "value": element.get("value"),
            "style": element.get("style"),
            "text": _plain(element.get("text")),
            "confirm": element.get("confirm"),
            "url": element.get("url"),
            "block_id": block_id,
        }
        for block_id, element in _buttons_with_blocks(_blocks_of(target))
    ]


def text_of(target: Any) -> str:
    """The message text and every text inside its blocks, one per line, for assertions."""
    parts: list[str] = []
    if isinstance(target, Message):
        parts.append(target.text)
    elif isinstance(target, dict) and isinstance(target.get("text"), str):
        parts.append(target["text"])
    for node in _walk(_blocks_of(target)):
        text = node.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(part for part in parts if part)


def sign_request(signing_secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------------------------
# Running ASGI apps and coroutines in background threads


class LoopThread:
    """An asyncio event loop running forever in a daemon thread; coroutines are handed to it."""

    def __init__(self, name: str = "loop-thread") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> Self:
        self.thread.start()
        return self

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run ``coro`` on the loop and wait for its result (not from the loop's own thread)."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking call from the loop's own thread would deadlock")
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what is still running, shut the loop down and close it."""
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            self.submit(self._drain(timeout)).result(timeout + 5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)
        self.loop.close()

    async def _drain(self, timeout: float) -> None:
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        await self.loop.shutdown_asyncgens()
        await self.loop.shutdown_default_executor()


class BackgroundServer:
    """Serves an ASGI app with uvicorn on 127.0.0.1 and a free port, from its own loop thread."""

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", name: str = "asgi") -> None:
        self.app = app
        self.host = host
        self.port = 0
        self.loop_thread = LoopThread(f"{name}-loop")
        self._server: uvicorn.Server | None = None
        self._serving: Future[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.loop_thread.loop

    def start(self, timeout: float = 10.0) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, 0))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="on",
            log_level="warning",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = self._server = uvicorn.Server(config)
        self.loop_thread.start()
        serving = self._serving = self.loop_thread.submit(server.serve(sockets=[sock]))
        deadline = time.monotonic() + timeout
        while not server.started:
            if serving.done() or time.monotonic() > deadline:
                sock.close()
                try:
                    self.stop()
                except Exception as error:
                    raise RuntimeError(f"uvicorn did not start on {self.url}") from error
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        server, serving = self._server, self._serving
        self._server = self._serving = None
        try:
            if server is not None and serving is not None and self.loop_thread.thread.is_alive():
                server.should_exit = True
                serving.result(timeout=15)
        finally:
            self.loop_thread.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Internal records


class _ApiError(Exception):
    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        messages: list[str] | None = None,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = headers or {}
        self.messages = messages or []

    def body(self) -> JSONDict:
        body: JSONDict = {"ok": False, "error": self.error}
        if self.messages:
            body["response_metadata"] = {"messages": self.messages}
        return body


@dataclass
class _App:
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
class _User:
    user_id: str
    name: str
    email: str
    real_name: str
    team_id: str


@dataclass
class _Connection:
    websocket: WebSocket
    app_id: str
    app_token: str
    send_lock: asyncio.Lock
    closing: bool = False


@dataclass
class _Trigger:
    user_id: str
    app_id: str
    issued_at: float
    used: bool = False


@dataclass
class _ResponseTarget:
    app_id: str
    user_id: str
    channel_id: str
    message_ts: str | None
    is_ephemeral: bool


@dataclass
class _ViewRecord:
    view: JSONDict
    user_id: str
    app_id: str
    is_open: bool = True


@dataclass
class _Failure:
    status: int
    error: str
    retry_after: int
    times: int


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class _Route:
    via: Via
    url: str | None
    signing_secret: str
    timestamp: str | int | None
    signature: str | None


@dataclass(frozen=True)
class _Ctx:
    app: _App
    token: str
    params: JSONDict


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes"}
    return bool(value)


def _new_id(prefix: str, length: int = 10) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def _form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


# --------------------------------------------------------------------------------------------
# Block Kit checks


def _check_text_length(obj: Any, limit: int, pointer: str, what: str, problems: list[str]) -> None:
    text = _plain(obj)
    if len(text) > limit:
        problems.append(f"{what} must be less than {limit + 1} characters [json-pointer:{pointer}]")


def _check_block(block: JSONDict, pointer: str, problems: list[str]) -> None:
    block_type = block.get("type")
    block_id = block.get("block_id")
    if isinstance(block_id, str) and len(block_id) > MAX_BLOCK_ID:
        problems.append(f"block_id must be at most {MAX_BLOCK_ID} characters [{pointer}/block_id]")
    if block_type == "section":
        _check_text_length(
            block.get("text"), MAX_SECTION_TEXT, f"{pointer}/text/text", "section text", problems
        )
        fields = block.get("fields") or []
        if isinstance(fields, list):
            if len(fields) > MAX_SECTION_FIELDS:
                problems.append(
                    f"no more than {MAX_SECTION_FIELDS} items allowed "
                    f"[json-pointer:{pointer}/fields]"
                )
            for index, item in enumerate(fields):
                _check_text_length(
                    item,
                    MAX_SECTION_FIELD_TEXT,
                    f"{pointer}/fields/{index}/text",
                    "section field",
                    problems,
                )
    elif block_type == "header":
        _check_text_length(
            block.get("text"), MAX_HEADER_TEXT, f"{pointer}/text/text", "header text", problems
        )
    elif block_type == "actions":
        elements = block.get("elements") or []
        if isinstance(elements, list) and len(elements) > MAX_ACTIONS_ELEMENTS:
            problems.append(
                f"no more than {MAX_ACTIONS_ELEMENTS} items allowed "
                f"[json-pointer:{pointer}/elements]"
            )
    elif block_type == "context":
        elements = block.get("elements") or []
        if isinstance(elements, list) and len(elements) > MAX_CONTEXT_ELEMENTS:
            problems.append(
                f"no more than {MAX_CONTEXT_ELEMENTS} items allowed "
                f"[json-pointer:{pointer}/elements]"
            )
    for node in _walk(block):
        if node is block or node.get("type") != "button":
            continue
        where = f"{pointer} button {node.get('action_id')!r}"
        _check_text_length(node.get("text"), MAX_BUTTON_TEXT, where, "button text", problems)
        for key, limit in (
            ("value", MAX_BUTTON_VALUE),
            ("action_id", MAX_ACTION_ID),
            ("url", MAX_BUTTON_URL),
        ):
            value = node.get(key)
            if isinstance(value, str) and len(value) > limit:
                problems.append(f"button {key} must be at most {limit} characters [{where}]")


def _check_blocks(raw: Any, limit: int) -> list[JSONDict]:
    """The blocks as a list, or ``invalid_blocks`` if Slack would refuse them."""
    if raw is None or raw == "":
        return []
    blocks = raw
    if isinstance(raw, str):
        try:
            blocks = json.loads(raw)
        except ValueError:
            raise _ApiError(
                "invalid_blocks", messages=["[ERROR] blocks is not valid JSON"]
            ) from None
    if not isinstance(blocks, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in blocks
    ):
        raise _ApiError(
            "invalid_blocks", messages=["[ERROR] blocks must be an array of block objects"]
        )
    problems: list[str] = []
    if len(blocks) > limit:
        problems.append(f"no more than {limit} items allowed [json-pointer:/blocks]")
    for index, block in enumerate(blocks):
        _check_block(block, f"/blocks/{index}", problems)
    if problems:
        raise _ApiError("invalid_blocks", messages=[f"[ERROR] {problem}" for problem in problems])
    return copy.deepcopy(blocks)


def _check_text(params: JSONDict) -> str | None:
    """The ``text`` argument (None when absent), refused beyond Slack's 40,000 characters."""
    text = params.get("text")
    if text is None:
        return None
    text = str(text)
    if len(text) > MAX_TEXT_ARGUMENT:
        raise _ApiError(
            "invalid_blocks",
            messages=[f"[ERROR] text must be at most {MAX_TEXT_ARGUMENT} characters"],
        )
    return text


def _check_view(raw: Any, expected_type: str | None = None) -> JSONDict:
    view = raw
    if isinstance(raw, str):
        try:
            view = json.loads(raw)
        except ValueError:
            raise _ApiError("invalid_arguments", messages=["[ERROR] view is not JSON"]) from None
    if not isinstance(view, dict):
        raise _ApiError("invalid_arguments", messages=["[ERROR] missing required field: view"])
    view_type = view.get("type")
    if view_type not in {"modal", "home"} or (expected_type and view_type != expected_type):
        raise _ApiError(
            "invalid_arguments",
            messages=[f"[ERROR] view type must be {expected_type or 'modal or home'}"],
        )
    blocks = _check_blocks(view.get("blocks"), MAX_VIEW_BLOCKS)
    problems: list[str] = []
    if view_type == "modal":
        if not _plain(view.get("title")):
            problems.append("missing required field: title [json-pointer:/view/title]")
        for key in ("title", "submit", "close"):
            if len(_plain(view.get(key))) > MAX_VIEW_TITLE:
                problems.append(
                    f"must be less than {MAX_VIEW_TITLE + 1} characters "
                    f"[json-pointer:/view/{key}/text]"
                )
        if any(block.get("type") == "input" for block in blocks) and not view.get("submit"):
            problems.append("submit is required when an input block is within the blocks array")
    for key, limit in (
        ("private_metadata", MAX_PRIVATE_METADATA),
        ("callback_id", MAX_CALLBACK_ID),
        ("external_id", MAX_CALLBACK_ID),
    ):
        value = view.get(key)
        if isinstance(value, str) and len(value) > limit:
            problems.append(f"must be less than {limit + 1} characters [json-pointer:/view/{key}]")
    if problems:
        raise _ApiError("invalid_arguments", messages=[f"[ERROR] {p}" for p in problems])
    view = copy.deepcopy(view)
    view["blocks"] = blocks
    return view


# --------------------------------------------------------------------------------------------
# View state

_VALUE_ELEMENTS = {"plain_text_input", "email_text_input", "url_text_input", "number_input"}
_SINGLE_VALUE_ELEMENTS = {
    "timepicker": ("selected_time", "initial_time"),
    "datepicker": ("selected_date", "initial_date"),
    "datetimepicker": ("selected_date_time", "initial_date_time"),
    "users_select": ("selected_user", "initial_user"),
    "conversations_select": ("selected_conversation", "initial_conversation"),
    "channels_select": ("selected_channel", "initial_channel"),
}
_MULTI_VALUE_ELEMENTS = {
    "multi_users_select": ("selected_users", "initial_users"),
    "multi_conversations_select": ("selected_conversations", "initial_conversations"),
    "multi_channels_select": ("selected_channels", "initial_channels"),
}
_SINGLE_OPTION_ELEMENTS = {"static_select", "external_select", "radio_buttons"}
_MULTI_OPTION_ELEMENTS = {"multi_static_select", "multi_external_select", "checkboxes"}


def _options_of(element: JSONDict) -> list[JSONDict]:
    options = [o for o in element.get("options") or [] if isinstance(o, dict)]
    for group in element.get("option_groups") or []:
        options.extend(o for o in group.get("options") or [] if isinstance(o, dict))
    return options


def _resolve_option(element: JSONDict, value: Any) -> JSONDict:
    if isinstance(value, dict):
        return copy.deepcopy(value)
    for option in _options_of(element):
        if option.get("value") == value:
            return copy.deepcopy(option)
    if "external" in str(element.get("type")):
        return {"text": {"type": "plain_text", "text": str(value)}, "value": str(value)}
    offered = [option.get("value") for option in _options_of(element)]
    raise LookupError(
        f"{element.get('type')} {_action_id(element)!r} offers no option {value!r}; "
        f"options: {offered}"
    )


def _element_state(element: JSONDict, value: Any, given: bool) -> JSONDict:
    element_type = str(element.get("type"))
    state: JSONDict = {"type": element_type}
    if element_type in _VALUE_ELEMENTS:
        initial = element.get("initial_value")
        state["value"] = (None if value is None else str(value)) if given else initial
    elif element_type in _SINGLE_VALUE_ELEMENTS:
        key, initial_key = _SINGLE_VALUE_ELEMENTS[element_type]
        if given and element_type == "timepicker" and not re.fullmatch(r"\d\d:\d\d", str(value)):
            raise ValueError(f"a timepicker value is 'HH:MM', not {value!r}")
        state[key] = value if given else element.get(initial_key)
    elif element_type in _MULTI_VALUE_ELEMENTS:
        key, initial_key = _MULTI_VALUE_ELEMENTS[element_type]
        state[key] = list(value) if given else list(element.get(initial_key) or [])
    elif element_type in _SINGLE_OPTION_ELEMENTS:
        if given:
            state["selected_option"] = None if value is None else _resolve_option(element, value)
        else:
            state["selected_option"] = copy.deepcopy(element.get("initial_option"))
    elif element_type in _MULTI_OPTION_ELEMENTS:
        if given:
            values = [value] if isinstance(value, str | dict) else list(value)
            state["selected_options"] = [_resolve_option(element, item) for item in values]
        else:
            state["selected_options"] = copy.deepcopy(element.get("initial_options") or [])
    elif element_type == "rich_text_input":
        if given and isinstance(value, str):
            value = {
                "type": "rich_text",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": value}]}
                ],
            }
        state["rich_text_value"] = value if given else element.get("initial_value")
    else:
        state["value"] = value if given else None
    return state


def _stateful_elements(block: JSONDict) -> list[JSONDict]:
    block_type = block.get("type")
    if block_type == "input":
        element = block.get("element")
        return [element] if isinstance(element, dict) else []
    if block_type == "actions":
        return [e for e in block.get("elements") or [] if isinstance(e, dict)]
    if block_type == "section" and isinstance(block.get("accessory"), dict):
        return [block["accessory"]]
    return []


def _view_state(view: JSONDict, values: dict[str, dict[str, Any]]) -> JSONDict:
    """``state.values`` for a submission: every input, filled from ``values`` or its initial."""
    remaining = {block_id: dict(actions) for block_id, actions in values.items()}
    state: JSONDict = {}
    known: dict[str, list[str]] = {}
    for index, block in enumerate(view.get("blocks") or []):
        block_id = _block_id(index, block)
        given_here = remaining.pop(block_id, {})
        for element in _stateful_elements(block):
            if element.get("type") in {"button", "overflow", "image"}:
                continue
            action_id = _action_id(element)
            known.setdefault(block_id, []).append(action_id)
            given = action_id in given_here
            if block.get("type") != "input" and not given:
                continue
            value = given_here.pop(action_id, None)
            state.setdefault(block_id, {})[action_id] = _element_state(element, value, given)
        if given_here:
            raise LookupError(
                f"block {block_id!r} has no input {sorted(given_here)}; "
                f"it has {known.get(block_id, [])}"
            )
    if remaining:
        raise LookupError(f"the view has no block {sorted(remaining)}; inputs: {known}")
    return state


# --------------------------------------------------------------------------------------------
# The server


class SlackServer:
    """A Slack workspace on 127.0.0.1 for the real Slack clients (see the module docstring).

    ``trigger_ttl`` is how long a trigger_id stays valid (Slack: 3 s; None: forever),
    ``ack_timeout`` how long to wait for an app's ack (Slack: 3 s) and ``connect_timeout`` how
    long a delivery waits for a Socket Mode connection of the app.
    """

    def __init__(
        self,
        *,
        trigger_ttl: float | None = 3.0,
        ack_timeout: float = 3.0,
        connect_timeout: float = 3.0,
    ) -> None:
        self.trigger_ttl = trigger_ttl
        self.ack_timeout = ack_timeout
        self.connect_timeout = connect_timeout
        self._cond = threading.Condition()
        self._apps: dict[str, _App] = {}
        self._tokens: dict[str, tuple[_App, Literal["bot", "app"]]] = {}
        self._revoked: set[str] = set()
        self._users: dict[str, _User] = {}
        self._channel_names: dict[str, str] = {}
        self._removed_channels: set[str] = set()
        self._dm_users: dict[str, str] = {}
        self._messages: list[Message] = []
        self._messages_by_key: dict[tuple[str, str], Message] = {}
        self._ephemerals: dict[str, list[JSONDict]] = {}
        self._responses: list[JSONDict] = []
        self._views: dict[str, _ViewRecord] = {}
        self._view_stacks: dict[str, list[str]] = {}
        self._home_views: dict[tuple[str, str], str] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._response_targets: dict[str, _ResponseTarget] = {}
        self._calls: list[Call] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._pacing: tuple[float, int] | None = None
        self._buckets: dict[str, _Bucket] = {}
        self._pacing_violations = 0
        self._last_ts_micros = 0
        self._tickets: dict[str, tuple[str, str]] = {}
        self._connections: list[_Connection] = []
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._pending_acks: dict[str, asyncio.Future[JSONDict]] = {}
        self._http: httpx.AsyncClient | None = None
        self._background: BackgroundServer | None = None
        self._methods: dict[str, Callable[[_Ctx], JSONDict]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "conversations.open": self._conversations_open,
            "conversations.info": self._conversations_info,
            "views.open": self._views_open,
            "views.push": self._views_push,
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "users.info": self._users_info,
            "users.lookupByEmail": self._users_lookup_by_email,
        }

    # ---- running -------------------------------------------------------------------------

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

    @property
    def _running(self) -> BackgroundServer:
        if self._background is None:
            raise RuntimeError("the Slack server is not running (use start() or `with`)")
        return self._background

    @property
    def port(self) -> int:
        return self._running.port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self._running.url

    @property
    def base_url(self) -> str:
        """What slack_sdk's ``base_url`` takes: ``http://127.0.0.1:PORT/api/``."""
        return f"{self.url}/api/"

    # ---- workspace state -----------------------------------------------------------------

    def add_app(
        self,
        bot_token: str = DEFAULT_BOT_TOKEN,
        app_token: str = DEFAULT_APP_TOKEN,
        team_id: str = "T0001",
        team_name: str = "Acme",
        bot_user_id: str = "U0BOT",
        app_id: str = "A0001",
        *,
        bot_id: str | None = None,
        bot_name: str = "accessgate",
        signing_secret: str | None = None,
        verification_token: str | None = None,
        request_url: str | None = None,
    ) -> None:
        """Install an app; calling again with the same ``app_id`` adds tokens to it."""
        with self._cond:
            app = self._apps.get(app_id)
            if app is None:
                app = _App(
                    app_id=app_id,
                    team_id=team_id,
                    team_name=team_name,
                    bot_user_id=bot_user_id,
                    bot_id=bot_id or "B" + app_id.removeprefix("A"),
                    bot_name=bot_name,
                    signing_secret=signing_secret or secrets.token_hex(16),
                    verification_token=verification_token or _new_id("", 24).lower(),
                    request_url=request_url,
                )
                self._apps[app_id] = app
            else:
                app.signing_secret = signing_secret or app.signing_secret
                app.request_url = request_url or app.request_url
            for token, kind in ((bot_token, "bot"), (app_token, "app")):
                owner = self._tokens.get(token)
                if owner is not None and owner[0] is not app:
                    raise ValueError(f"token {token!r} already belongs to {owner[0].app_id}")
                self._tokens[token] = (app, "bot" if kind == "bot" else "app")
                self._revoked.discard(token)
                tokens = app.bot_tokens if kind == "bot" else app.app_tokens
                if token not in tokens:
                    tokens.append(token)
            self._cond.notify_all()

    def revoke_token(self, token: str) -> None:
        """Later calls with ``token`` answer ``invalid_auth``."""
        with self._cond:
            self._revoked.add(token)
            self._cond.notify_all()

    def signing_secret(self, app_id: str = "A0001") -> str:
        with self._cond:
            return self._apps[app_id].signing_secret

    def add_user(
        self,
        user_id: str,
        name: str,
        email: str,
        real_name: str | None = None,
        *,
        team_id: str | None = None,
    ) -> None:
        with self._cond:
            if team_id is None:
                team_id = next(iter(self._apps.values())).team_id if self._apps else "T0001"
            self._users[user_id] = _User(user_id, name, email, real_name or name, team_id)

    def add_channel(self, channel_id: str, name: str) -> None:
        """Name a channel (any C…/G… id exists already); undoes remove_channel."""
        with self._cond:
            self._channel_names[channel_id] = name
            self._removed_channels.discard(channel_id)

    def remove_channel(self, channel_id: str) -> None:
        """Calls naming this channel answer ``channel_not_found`` from now on."""
        with self._cond:
            self._removed_channels.add(channel_id)

    @staticmethod
    def dm_channel_id(user_id: str) -> str:
        """The id of the app's DM channel with ``user_id`` (stable)."""
        return "D" + (user_id[1:] if user_id[:1] in {"U", "W"} else user_id)

    # ---- failures and pacing ---------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: int = 1,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail.

        ``status=429`` (the default without ``error``) answers HTTP 429 with ``Retry-After`` and
        ``ratelimited``; another status answers that HTTP status; ``error=...`` alone answers
        HTTP 200 ``{"ok": false, "error": error}``.
        """
        if status is None:
            status = 200 if error else 429
        if error is None:
            error = "ratelimited" if status == 429 else "internal_error"
        with self._cond:
            self._failures.setdefault(method, []).append(
                _Failure(status=status, error=error, retry_after=retry_after, times=times)
            )

    def pace_channels(self, messages_per_second: float | None = 1.0, burst: int = 1) -> None:
        """Refuse chat.postMessage beyond ``messages_per_second`` per channel (None: off)."""
        with self._cond:
            self._pacing = None if messages_per_second is None else (messages_per_second, burst)
            self._buckets.clear()

    @property
    def pacing_violations(self) -> int:
        with self._cond:
            return self._pacing_violations

    # ---- recorded state ------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        with self._cond:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        with self._cond:
            return [call for call in self._calls if call.method == method]

    def messages(self, channel: str | None = None) -> list[Message]:
        """Messages not deleted, in posted order (copies)."""
        with self._cond:
            return [
                copy.deepcopy(message)
                for message in self._messages
                if not message.deleted and (channel is None or message.channel == channel)
            ]

    def message(self, channel: str, ts: str) -> Message:
        """The latest version of one message (KeyError if never posted)."""
        with self._cond:
            found = self._messages_by_key.get((channel, ts))
            if found is None:
                raise KeyError(f"no message {ts} in {channel}")
            return copy.deepcopy(found)

    def dms(self, user_id: str) -> list[Message]:
        return self.messages(self.dm_channel_id(user_id))

    def ephemerals(self, user_id: str) -> list[JSONDict]:
        with self._cond:
            return copy.deepcopy(self._ephemerals.get(user_id, []))

    @property
    def responses(self) -> list[JSONDict]:
        """Every POST to a response_url: url, body, user_id, channel_id, message_ts, status."""
        with self._cond:
            return copy.deepcopy(self._responses)

    def open_views(self, user_id: str) -> list[JSONDict]:
        """The user's open modals, bottom of the stack first."""
        with self._cond:
            stack = self._view_stacks.get(user_id, [])
            return [copy.deepcopy(self._views[view_id].view) for view_id in stack]

    def home_view(self, user_id: str, app_id: str | None = None) -> JSONDict | None:
        with self._cond:
            for (user, app), view_id in self._home_views.items():
                if user == user_id and app_id in (None, app):
                    return copy.deepcopy(self._views[view_id].view)
            return None

    def view(self, view_id: str) -> JSONDict:
        with self._cond:
            record = self._views.get(view_id)
            if record is None:
                raise KeyError(f"no view {view_id}")
            return copy.deepcopy(record.view)

    buttons = staticmethod(buttons)
    text_of = staticmethod(text_of)

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 10.0, message: str | None = None
    ) -> None:
        """Wait until ``predicate()`` is true, raising TimeoutError with what was recorded.

        The predicate is re-checked whenever the server records something, and every 50 ms for
        predicates on state kept elsewhere (it may call this server's methods).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    what = message or getattr(predicate, "__qualname__", repr(predicate))
                    raise TimeoutError(f"not true after {timeout} s: {what}\n{self._summary()}")
                self._cond.wait(min(remaining, 0.05))

    def _summary(self) -> str:
        recent = ", ".join(
            f"{call.method}→{call.status}{'' if call.ok else ' ' + str(call.error)}"
            for call in self._calls[-8:]
        )
        live = [m for m in self._messages if not m.deleted]
        lines = [
            f"calls: {len(self._calls)} (latest: {recent or 'none'})",
            f"messages: {len(live)}"
            + "".join(f"\n  {m.channel} {m.ts}: {text_of(m)[:120]!r}" for m in live[-5:]),
            f"socket connections: {len([c for c in self._connections if not c.closing])}",
            f"open views: { {u: len(s) for u, s in self._view_stacks.items() if s} }",
        ]
        return "\n".join(lines)

    # ---- Socket Mode bookkeeping -----------------------------------------------------------

    def _app_for_token(self, app_token: str) -> _App:
        entry = self._tokens.get(app_token)
        if entry is None:
            raise LookupError(f"unknown token {app_token!r}")
        return entry[0]

    def _live_connections(self, app_id: str) -> list[_Connection]:
        return [c for c in self._connections if c.app_id == app_id and not c.closing]

    def socket_connections(self, app_token: str) -> int:
        """Open Socket Mode connections of the app owning ``app_token``."""
        with self._cond:
            return len(self._live_connections(self._app_for_token(app_token).app_id))

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

    async def _disconnect(self, connections: list[_Connection], reason: str) -> None:
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "local"}}
        for connection in connections:
            with contextlib.suppress(Exception):
                await self._ws_send(connection, message)
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

    # ---- acting as a user ------------------------------------------------------------------

    def _routed(self, delivery: Delivery) -> tuple[_App, _Route]:
        app = self._pick_app(delivery.get("app_token"), delivery.get("team_id"))
        route = self._route(
            app,
            delivery.get("via", "socket"),
            delivery.get("http_url"),
            delivery.get("signing_secret"),
            delivery.get("timestamp"),
            delivery.get("signature"),
        )
        return app, route

    def _pick_app(self, app_token: str | None, team_id: str | None) -> _App:
        if app_token is not None:
            return self._app_for_token(app_token)
        for app in self._apps.values():
            if team_id is None or app.team_id == team_id:
                return app
        raise LookupError(f"no app in team {team_id}" if team_id else "no app: call add_app()")

    def _route(
        self,
        app: _App,
        via: Via,
        http_url: str | None,
        signing_secret: str | None,
        timestamp: str | int | None,
        signature: str | None,
    ) -> _Route:
        if via not in ("socket", "http"):
            raise ValueError(f"via must be 'socket' or 'http', not {via!r}")
        url = http_url or app.request_url
        if via == "http" and not url:
            raise ValueError("via='http' needs http_url= (or add_app(request_url=...))")
        return _Route(via, url, signing_secret or app.signing_secret, timestamp, signature)

    def _user_object(self, app: _App, user_id: str) -> JSONDict:
        user = self._users.get(user_id)
        name = user.name if user else user_id.lower()
        return {"id": user_id, "username": name, "name": name, "team_id": app.team_id}

    def _team_object(self, app: _App) -> JSONDict:
        return {"id": app.team_id, "domain": app.team_domain}

    def _channel_name(self, channel_id: str) -> str:
        if channel_id in self._channel_names:
            return self._channel_names[channel_id]
        return "directmessage" if channel_id.startswith("D") else channel_id.lower()

    def _issue_trigger(self, app: _App, user_id: str) -> str:
        trigger_id = f"{int(time.time())}.{secrets.randbelow(10**10)}.{secrets.token_hex(16)}"
        self._triggers[trigger_id] = _Trigger(user_id, app.app_id, time.monotonic())
        return trigger_id

    def _issue_response_url(
        self, app: _App, user_id: str, channel_id: str, ts: str | None, ephemeral: bool
    ) -> str:
        response_id = secrets.token_hex(12)
        self._response_targets[response_id] = _ResponseTarget(
            app.app_id, user_id, channel_id, ts, ephemeral
        )
        return f"{self.url}/response/{response_id}"

    def _block_actions_payload(
        self, app: _App, user_id: str, target: Any, action_id: str, value: str | None
    ) -> tuple[JSONDict, str | None]:
        """The payload of a button click on ``target`` and the id of the view clicked, if any."""
        payload: JSONDict = {
            "type": "block_actions",
            "user": self._user_object(app, user_id),
            "api_app_id": app.app_id,
            "token": app.verification_token,
        }
        view_id: str | None = None
        if isinstance(target, Message):
            stored = self._messages_by_key.get((target.channel, target.ts))
            if stored is None or stored.deleted:
                raise LookupError(f"message {target.ts} in {target.channel} no longer exists")
            blocks = stored.blocks
            container: JSONDict = {
                "type": "message",
                "message_ts": stored.ts,
                "channel_id": stored.channel,
                "is_ephemeral": False,
            }
            channel_id, message_ts, ephemeral = stored.channel, stored.ts, False
        elif isinstance(target, dict) and "message_ts" in target:
            channel_id, message_ts, ephemeral = str(target["channel"]), target["message_ts"], True
            stored_ephemeral = next(
                (
                    e
                    for e in self._ephemerals.get(str(target.get("user")), [])
                    if e["message_ts"] == message_ts
                ),
                target,
            )
            blocks = stored_ephemeral.get("blocks") or []
            container = {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel_id,
                "is_ephemeral": True,
            }
        elif isinstance(target, dict) and str(target.get("id", "")).startswith("V"):
            record = self._views.get(str(target["id"]))
            view = record.view if record is not None else target
            if record is not None and not record.is_open and view.get("type") == "modal":
                raise LookupError(f"view {target['id']} is closed")
            view_id = str(view["id"])
            blocks = view.get("blocks") or []
            container = {"type": "view", "view_id": view_id}
            channel_id, message_ts, ephemeral = "", None, False
        else:
            raise TypeError(f"cannot click on {type(target).__name__}: pass a Message or view")
        block_id, element = self._find_button(blocks, action_id, value)
        payload["container"] = container
        payload["trigger_id"] = self._issue_trigger(app, user_id)
        payload["team"] = self._team_object(app)
        payload["enterprise"] = None
        payload["is_enterprise_install"] = False
        if channel_id:
            payload["channel"] = {"id": channel_id, "name": self._channel_name(channel_id)}
        if isinstance(target, Message):
            payload["message"] = self._messages_by_key[(channel_id, str(message_ts))].to_dict()
        if view_id is not None:
            view = copy.deepcopy(self._views[view_id].view) if view_id in self._views else target
            payload["view"] = view
        payload["state"] = {"values": {}}
        if channel_id:
            payload["response_url"] = self._issue_response_url(
                app, user_id, channel_id, message_ts, ephemeral
            )
        action: JSONDict = {
            "action_id": _action_id(element),
            "block_id": block_id,
            "text": copy.deepcopy(element.get("text")),
            "type": "button",
            "action_ts": f"{time.time():.6f}",
        }
        for key in ("value", "style"):
            if element.get(key) is not None:
                action[key] = element[key]
        payload["actions"] = [action]
        return payload, view_id

    @staticmethod
    def _find_button(
        blocks: list[JSONDict], action_id: str, value: str | None
    ) -> tuple[str, JSONDict]:
        found = list(_buttons_with_blocks(blocks))
        for block_id, element in found:
            if _action_id(element) == action_id and (
                value is None or element.get("value") == value
            ):
                return block_id, element
        wanted = f"action_id={action_id!r}" + ("" if value is None else f" value={value!r}")
        offered = [(_action_id(e), e.get("value")) for _, e in found]
        raise LookupError(f"no button with {wanted} on this card; buttons: {offered}")

    def click(
        self,
        user_id: str,
        message: Any,
        action_id: str,
        *,
        value: str | None = None,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Click a button (found by action_id, and value if given) on a message, an ephemeral
        message (a dict from ``ephemerals()``) or a view; LookupError if there is none."""
        return self._wait(
            self.submit_click(
                user_id,
                message,
                action_id,
                value=value,
                **delivery,
            )
        )

    def submit_click(
        self,
        user_id: str,
        message: Any,
        action_id: str,
        *,
        value: str | None = None,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            payload, _ = self._block_actions_payload(app, user_id, message, action_id, value)
        return self._submit(self._deliver(app, "interactive", payload, route, False))

    def submit_view(
        self,
        user_id: str,
        view_id_or_view: str | JSONDict,
        values: dict[str, dict[str, Any]] | None = None,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Submit a modal with ``values`` = ``{block_id: {action_id: value}}``.

        The app's response_action is applied to the open views: none closes the modal, "errors"
        keeps it, "update" replaces it, "push" stacks a new one, "clear" closes them all.
        """
        return self._wait(
            self.submit_view_async(
                user_id,
                view_id_or_view,
                values,
                **delivery,
            )
        )

    def submit_view_async(
        self,
        user_id: str,
        view_id_or_view: str | JSONDict,
        values: dict[str, dict[str, Any]] | None = None,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            if isinstance(view_id_or_view, str):
                view_id = view_id_or_view
            else:
                view_id = str(view_id_or_view.get("id", ""))
            record = self._views.get(view_id)
            if record is None and isinstance(view_id_or_view, str):
                raise LookupError(f"no view {view_id}")
            if record is not None and not record.is_open:
                raise LookupError(f"view {view_id} is not open any more")
            view = copy.deepcopy(record.view if record else view_id_or_view)
            assert isinstance(view, dict)
            view["state"] = {"values": _view_state(view, values or {})}
            payload: JSONDict = {
                "type": "view_submission",
                "team": self._team_object(app),
                "user": self._user_object(app, user_id),
                "api_app_id": app.app_id,
                "token": app.verification_token,
                "trigger_id": self._issue_trigger(app, user_id),
                "view": view,
                "response_urls": [],
                "is_enterprise_install": False,
                "enterprise": None,
            }

        def after(ack: Ack) -> None:
            if record is not None:
                self._apply_response_action(app, record, ack)

        return self._submit(self._deliver(app, "interactive", payload, route, True, after))

    def slash_command(
        self,
        user_id: str,
        text: str,
        *,
        channel_id: str = "C0GENERAL",
        command: str = "/accessgate",
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Run ``{command} {text}`` in ``channel_id``; the ack's payload is the app's reply."""
        return self._wait(
            self.submit_slash_command(
                user_id,
                text,
                channel_id=channel_id,
                command=command,
                **delivery,
            )
        )

    def submit_slash_command(
        self,
        user_id: str,
        text: str,
        *,
        channel_id: str = "C0GENERAL",
        command: str = "/accessgate",
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            user = self._user_object(app, user_id)
            payload: JSONDict = {
                "token": app.verification_token,
                "team_id": app.team_id,
                "team_domain": app.team_domain,
                "channel_id": channel_id,
                "channel_name": self._channel_name(channel_id),
                "user_id": user_id,
                "user_name": user["name"],
                "command": command,
                "text": text,
                "api_app_id": app.app_id,
                "is_enterprise_install": "false",
                "response_url": self._issue_response_url(app, user_id, channel_id, None, False),
                "trigger_id": self._issue_trigger(app, user_id),
            }
        return self._submit(self._deliver(app, "slash_commands", payload, route, True))

    def open_app_home(
        self,
        user_id: str,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """The user opens the app's Home tab (an ``app_home_opened`` event)."""
        return self._wait(
            self.submit_open_app_home(
                user_id,
                **delivery,
            )
        )

    def submit_open_app_home(
        self,
        user_id: str,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            channel = self.dm_channel_id(user_id)
            self._dm_users[channel] = user_id
            now = time.time()
            event: JSONDict = {
                "type": "app_home_opened",
                "user": user_id,
                "channel": channel,
                "tab": "home",
                "event_ts": f"{now:.6f}",
            }
            home_id = self._home_views.get((user_id, app.app_id))
            if home_id is not None:
                event["view"] = copy.deepcopy(self._views[home_id].view)
            payload: JSONDict = {
                "token": app.verification_token,
                "team_id": app.team_id,
                "api_app_id": app.app_id,
                "event": event,
                "type": "event_callback",
                "event_id": _new_id("Ev", 10),
                "event_time": int(now),
                "authorizations": [
                    {
                        "enterprise_id": None,
                        "team_id": app.team_id,
                        "user_id": app.bot_user_id,
                        "is_bot": True,
                        "is_enterprise_install": False,
                    }
                ],
                "is_ext_shared_channel": False,
            }
        return self._submit(self._deliver(app, "events_api", payload, route, False))

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        try:
            background = self._running
        except RuntimeError:
            coro.close()
            raise
        return background.loop_thread.submit(coro)

    def _wait(self, future: Future[T]) -> T:
        if self._background and threading.current_thread() is self._background.loop_thread.thread:
            future.cancel()
            raise RuntimeError("use the submit_* methods from the server's own loop")
        return future.result(timeout=self.connect_timeout + self.ack_timeout + 10)

    # ---- delivery ----------------------------------------------------------------------------

    async def _deliver(
        self,
        app: _App,
        kind: Literal["interactive", "slash_commands", "events_api"],
        payload: JSONDict,
        route: _Route,
        accepts_response_payload: bool,
        after: Callable[[Ack], None] | None = None,
    ) -> Ack:
        if route.via == "socket":
            ack = await self._deliver_socket(app.app_id, kind, payload, accepts_response_payload)
        else:
            if kind == "interactive":
                body = urlencode({"payload": json.dumps(payload)}).encode()
                content_type = "application/x-www-form-urlencoded"
            elif kind == "slash_commands":
                body = urlencode({k: _form_value(v) for k, v in payload.items()}).encode()
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

    async def _pick_connection(self, app_id: str, deadline: float) -> _Connection:
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

    async def _ws_send(self, connection: _Connection, message: JSONDict) -> None:
        async with connection.send_lock:
            await connection.websocket.send_text(json.dumps(message))

    async def _deliver_socket(
        self, app_id: str, kind: str, payload: JSONDict, accepts_response_payload: bool
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
        elapsed = time.monotonic() - started
        ack_payload = reply.get("payload")
        return Ack(
            envelope_id, ack_payload if isinstance(ack_payload, dict) else None, 200, elapsed
        )

    async def _deliver_http(self, route: _Route, body: bytes, content_type: str) -> Ack:
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

    def _apply_response_action(self, app: _App, record: _ViewRecord, ack: Ack) -> None:
        if ack.status != 200 or not record.is_open:
            return
        payload = ack.payload or {}
        action = payload.get("response_action")
        stack = self._view_stacks.setdefault(record.user_id, [])
        view_id = str(record.view["id"])
        if action == "errors":
            return
        if action == "update" and isinstance(payload.get("view"), dict):
            self._replace_view(record, payload["view"])
        elif action == "push" and isinstance(payload.get("view"), dict):
            pushed = self._new_view(app, payload["view"], previous=record.view)
            self._views[pushed["id"]] = _ViewRecord(pushed, record.user_id, app.app_id)
            stack.append(pushed["id"])
        elif action == "clear":
            for open_id in stack:
                self._views[open_id].is_open = False
            stack.clear()
        else:
            record.is_open = False
            if view_id in stack:
                stack.remove(view_id)

    # ---- WebSocket endpoint --------------------------------------------------------------

    async def _socket_endpoint(self, websocket: WebSocket) -> None:
        ticket = websocket.query_params.get("ticket", "")
        with self._cond:
            owner = self._tickets.pop(ticket, None)
        if owner is None:
            await websocket.close(code=1008)
            return
        app_id, app_token = owner
        await websocket.accept()
        connection = _Connection(websocket, app_id, app_token, asyncio.Lock())
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
        pending = self._pending_acks.get(str(message.get("envelope_id")))
        if pending is not None and not pending.done():
            pending.set_result(message)

    # ---- response URLs -----------------------------------------------------------------------

    async def _response_endpoint(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        raw = await request.body()
        content_type = request.headers.get("content-type", "")
        try:
            if "application/x-www-form-urlencoded" in content_type:
                form = dict(parse_qsl(raw.decode(), keep_blank_values=True))
                body = json.loads(form.get("payload", "{}"))
            else:
                body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError(body)
        except ValueError:
            return PlainTextResponse("invalid_payload", status_code=400)
        with self._cond:
            target = self._response_targets.get(response_id)
            record: JSONDict = {
                "url": str(request.url),
                "body": body,
                "user_id": target.user_id if target else None,
                "channel_id": target.channel_id if target else None,
                "message_ts": target.message_ts if target else None,
                "time": time.monotonic(),
            }
            status, answer = 200, "ok"
            if target is None:
                status, answer = 404, "expired_url"
            else:
                try:
                    self._apply_response(target, body)
                except _ApiError as error:
                    status, answer = 400, error.error
            record["status"] = status
            self._responses.append(record)
            self._cond.notify_all()
        if status != 200:
            return PlainTextResponse(answer, status_code=status)
        return JSONResponse({"ok": True})

    def _apply_response(self, target: _ResponseTarget, body: JSONDict) -> None:
        app = self._apps[target.app_id]
        text = _check_text(body) or ""
        blocks = _check_blocks(body.get("blocks"), MAX_MESSAGE_BLOCKS)
        if _truthy(body.get("delete_original")):
            if target.is_ephemeral:
                self._ephemerals[target.user_id] = [
                    e
                    for e in self._ephemerals.get(target.user_id, [])
                    if e["message_ts"] != target.message_ts
                ]
            elif target.message_ts is not None:
                found = self._messages_by_key.get((target.channel_id, target.message_ts))
                if found is not None:
                    found.deleted = True
            return
        if _truthy(body.get("replace_original")) and target.message_ts is not None:
            if target.is_ephemeral:
                for ephemeral in self._ephemerals.get(target.user_id, []):
                    if ephemeral["message_ts"] == target.message_ts:
                        ephemeral.update(text=text, blocks=blocks)
                return
            found = self._messages_by_key.get((target.channel_id, target.message_ts))
            if found is not None and not found.deleted:
                self._update_message(found, text, blocks, None)
            return
        if body.get("response_type") == "in_channel":
            self._store_message(
                app, target.channel_id, text, blocks, None, body.get("thread_ts") or None
            )
        else:
            self._store_ephemeral(app, target.channel_id, target.user_id, text, blocks, None)

    # ---- Web API -----------------------------------------------------------------------------

    async def _api_endpoint(self, request: Request) -> Response:
        method = request.path_params["method"]
        params: JSONDict = dict(request.query_params)
        token: str | None = None
        raw = await request.body()
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        body_error: str | None = None
        if raw:
            if content_type == "application/json":
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                if isinstance(body, dict):
                    body.pop("token", None)  # Slack ignores tokens in JSON bodies
                    params.update(body)
                else:
                    body_error = "invalid_json"
            elif content_type in {"application/x-www-form-urlencoded", ""}:
                params.update(parse_qsl(raw.decode(), keep_blank_values=True))
            else:
                body_error = "invalid_form_data"
        authorization = request.headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
            params.pop("token", None)
        else:
            token = params.pop("token", None) or None
        for key in ("blocks", "attachments", "view", "metadata"):
            if isinstance(params.get(key), str) and params[key].strip()[:1] in {"[", "{"}:
                with contextlib.suppress(ValueError):
                    params[key] = json.loads(params[key])
        status, answer, headers = self._handle_api(method, params, token, body_error)
        return JSONResponse(answer, status_code=status, headers=headers)

    def _handle_api(
        self, method: str, params: JSONDict, token: str | None, body_error: str | None
    ) -> tuple[int, JSONDict, dict[str, str]]:
        with self._cond:
            status, headers = 200, {}
            try:
                failures = self._failures.get(method)
                if failures:
                    failure = failures[0]
                    failure.times -= 1
                    if failure.times <= 0:
                        failures.pop(0)
                    if failure.status == 429:
                        headers = {"Retry-After": str(failure.retry_after)}
                    raise _ApiError(failure.error, status=failure.status, headers=headers)
                if body_error is not None:
                    raise _ApiError(body_error)
                handler = self._methods.get(method)
                if handler is None:
                    raise _ApiError("unknown_method")
                app = self._authenticate(method, token)
                assert token is not None
                answer = {"ok": True, **handler(_Ctx(app, token, params))}
            except _ApiError as error:
                status, headers, answer = error.status, error.headers, error.body()
            self._calls.append(
                Call(
                    method=method,
                    params=copy.deepcopy(params),
                    token=token,
                    time=time.monotonic(),
                    status=status,
                    error=None if answer.get("ok") else str(answer.get("error")),
                )
            )
            self._cond.notify_all()
            return status, answer, headers

    def _authenticate(self, method: str, token: str | None) -> _App:
        if not token:
            raise _ApiError("not_authed")
        entry = self._tokens.get(token)
        if entry is None or token in self._revoked:
            raise _ApiError("invalid_auth")
        app, kind = entry
        if kind != ("app" if method == "apps.connections.open" else "bot"):
            raise _ApiError("not_allowed_token_type")
        return app

    def _next_ts(self) -> str:
        micros = max(int(time.time() * 1_000_000), self._last_ts_micros + 1)
        self._last_ts_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _resolve_channel(self, requested: Any) -> str:
        if not isinstance(requested, str) or not requested:
            raise _ApiError("channel_not_found")
        channel: str = requested
        if channel.startswith("#"):
            named = [cid for cid, name in self._channel_names.items() if name == channel[1:]]
            if not named:
                raise _ApiError("channel_not_found")
            channel = named[0]
        if channel in self._removed_channels:
            raise _ApiError("channel_not_found")
        if channel[0] in {"U", "W"}:
            dm = self.dm_channel_id(channel)
            self._dm_users[dm] = channel
            return dm
        if channel[0] in {"C", "G"} or channel in self._dm_users:
            return channel
        raise _ApiError("channel_not_found")

    def _pace(self, channel: str) -> None:
        if self._pacing is None:
            return
        rate, burst = self._pacing
        now = time.monotonic()
        bucket = self._buckets.setdefault(channel, _Bucket(float(burst), now))
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        self._pacing_violations += 1
        retry_after = max(1, math.ceil((1.0 - bucket.tokens) / rate))
        raise _ApiError("ratelimited", status=429, headers={"Retry-After": str(retry_after)})

    def _metadata(self, params: JSONDict) -> JSONDict | None:
        metadata = params.get("metadata")
        if metadata in (None, ""):
            return None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("event_type"), str):
            raise _ApiError("invalid_metadata_format")
        return copy.deepcopy(metadata)

    def _store_message(
        self,
        app: _App,
        channel: str,
        text: str,
        blocks: list[JSONDict],
        metadata: JSONDict | None,
        thread_ts: str | None,
    ) -> Message:
        message = Message(
            channel=channel,
            ts=self._next_ts(),
            text=text,
            blocks=blocks,
            metadata=metadata,
            thread_ts=thread_ts,
            user=app.bot_user_id,
            posted_at=time.monotonic(),
            app_id=app.app_id,
            bot_id=app.bot_id,
            team_id=app.team_id,
        )
        self._messages.append(message)
        self._messages_by_key[(channel, message.ts)] = message
        return message

    def _update_message(
        self,
        message: Message,
        text: str | None,
        blocks: list[JSONDict] | None,
        metadata: JSONDict | None,
    ) -> None:
        message.history.append((message.text, message.blocks))
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = blocks
        if metadata is not None:
            message.metadata = metadata
        message.update_count += 1
        message.updated_at = time.monotonic()

    def _store_ephemeral(
        self,
        app: _App,
        channel: str,
        user_id: str,
        text: str,
        blocks: list[JSONDict],
        thread_ts: str | None,
    ) -> JSONDict:
        ephemeral: JSONDict = {
            "channel": channel,
            "user": user_id,
            "text": text,
            "blocks": blocks,
            "thread_ts": thread_ts,
            "message_ts": self._next_ts(),
            "app_id": app.app_id,
            "posted_at": time.monotonic(),
        }
        self._ephemerals.setdefault(user_id, []).append(ephemeral)
        return ephemeral

    # Methods: each takes the request context and returns the answer without ``ok``.

    def _auth_test(self, ctx: _Ctx) -> JSONDict:
        app = ctx.app
        return {
            "url": f"https://{app.team_domain}.slack.com/",
            "team": app.team_name,
            "user": app.bot_name,
            "team_id": app.team_id,
            "user_id": app.bot_user_id,
            "bot_id": app.bot_id,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, ctx: _Ctx) -> JSONDict:
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = (ctx.app.app_id, ctx.token)
        query = urlencode({"ticket": ticket, "app_id": ctx.app.app_id})
        return {"url": f"ws://127.0.0.1:{self.port}/link/?{query}"}

    def _chat_post_message(self, ctx: _Ctx) -> JSONDict:
        params = ctx.params
        channel = self._resolve_channel(params.get("channel"))
        text = _check_text(params) or ""
        blocks = _check_blocks(params.get("blocks"), MAX_MESSAGE_BLOCKS)
        if not text and not blocks and not params.get("attachments"):
            raise _ApiError("no_text")
        metadata = self._metadata(params)
        self._pace(channel)
        thread_ts = params.get("thread_ts") or None
        message = self._store_message(ctx.app, channel, text, blocks, metadata, thread_ts)
        return {"channel": channel, "ts": message.ts, "message": message.to_dict()}

    def _owned_message(self, ctx: _Ctx) -> Message:
        channel = ctx.params.get("channel")
        if not isinstance(channel, str) or channel in self._removed_channels:
            raise _ApiError("channel_not_found")
        if channel[:1] in {"U", "W"}:
            channel = self.dm_channel_id(channel)
        message = self._messages_by_key.get((channel, str(ctx.params.get("ts"))))
        if message is None or message.deleted:
            raise _ApiError("message_not_found")
        if message.app_id != ctx.app.app_id:
            raise _ApiError("cant_update_message")
        return message

    def _chat_update(self, ctx: _Ctx) -> JSONDict:
        message = self._owned_message(ctx)
        text = _check_text(ctx.params)
        blocks = None
        if "blocks" in ctx.params:
            blocks = _check_blocks(ctx.params["blocks"], MAX_MESSAGE_BLOCKS)
        if text is None and blocks is None and "attachments" not in ctx.params:
            raise _ApiError("no_text")
        self._update_message(message, text, blocks, self._metadata(ctx.params))
        return {
            "channel": message.channel,
            "ts": message.ts,
            "text": message.text,
            "message": message.to_dict(),
        }

    def _chat_delete(self, ctx: _Ctx) -> JSONDict:
        message = self._owned_message(ctx)
        message.deleted = True
        return {"channel": message.channel, "ts": message.ts}

    def _chat_post_ephemeral(self, ctx: _Ctx) -> JSONDict:
        params = ctx.params
        channel = self._resolve_channel(params.get("channel"))
        user_id = params.get("user")
        if not isinstance(user_id, str) or not user_id:
            raise _ApiError("user_not_in_channel")
        text = _check_text(params) or ""
        blocks = _check_blocks(params.get("blocks"), MAX_MESSAGE_BLOCKS)
        if not text and not blocks and not params.get("attachments"):
            raise _ApiError("no_text")
        thread_ts = params.get("thread_ts") or None
        ephemeral = self._store_ephemeral(ctx.app, channel, user_id, text, blocks, thread_ts)
        return {"message_ts": ephemeral["message_ts"]}

    def _conversations_open(self, ctx: _Ctx) -> JSONDict:
        users = ctx.params.get("users")
        if isinstance(users, list):
            users = ",".join(str(user) for user in users)
        if not isinstance(users, str) or not users.strip():
            raise _ApiError("users_list_not_supplied")
        ids = [user.strip() for user in users.split(",") if user.strip()]
        if len(ids) == 1:
            channel = self.dm_channel_id(ids[0])
            already_open = channel in self._dm_users
            self._dm_users[channel] = ids[0]
            return {"no_op": already_open, "already_open": already_open, "channel": {"id": channel}}
        channel = "G" + _auto_id(sorted(ids)).upper()
        return {"channel": {"id": channel}}

    def _conversations_info(self, ctx: _Ctx) -> JSONDict:
        channel = self._resolve_channel(ctx.params.get("channel"))
        info: JSONDict = {
            "id": channel,
            "name": self._channel_name(channel),
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": channel.startswith("D"),
            "is_private": not channel.startswith("C"),
        }
        if channel in self._dm_users:
            info["user"] = self._dm_users[channel]
        return {"channel": info}

    def _use_trigger(self, trigger_id: Any) -> _Trigger:
        trigger = self._triggers.get(str(trigger_id))
        if trigger is None:
            raise _ApiError("invalid_trigger_id")
        if trigger.used:
            raise _ApiError("exchanged_trigger_id")
        if self.trigger_ttl is not None and time.monotonic() - trigger.issued_at > self.trigger_ttl:
            raise _ApiError("expired_trigger_id")
        trigger.used = True
        return trigger

    def _new_view(
        self,
        app: _App,
        view: JSONDict,
        view_id: str | None = None,
        previous: JSONDict | None = None,
    ) -> JSONDict:
        view_id = view_id or _new_id("V", 10)
        return {
            "id": view_id,
            "team_id": app.team_id,
            "type": view.get("type"),
            "blocks": copy.deepcopy(view.get("blocks") or []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "title": copy.deepcopy(view.get("title")),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": copy.deepcopy(view.get("close")),
            "submit": copy.deepcopy(view.get("submit")),
            "previous_view_id": previous["id"] if previous else None,
            "root_view_id": previous["root_view_id"] if previous else view_id,
            "app_id": app.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": app.team_id,
            "bot_id": app.bot_id,
        }

    def _replace_view(self, record: _ViewRecord, view: JSONDict) -> None:
        old = record.view
        app = self._apps[record.app_id]
        replacement = self._new_view(app, view, view_id=str(old["id"]))
        replacement["previous_view_id"] = old.get("previous_view_id")
        replacement["root_view_id"] = old.get("root_view_id")
        record.view = replacement

    def _views_open(self, ctx: _Ctx) -> JSONDict:
        view = _check_view(ctx.params.get("view"), "modal")
        trigger = self._use_trigger(ctx.params.get("trigger_id"))
        stored = self._new_view(ctx.app, view)
        self._views[stored["id"]] = _ViewRecord(stored, trigger.user_id, ctx.app.app_id)
        self._view_stacks[trigger.user_id] = [stored["id"]]
        return {"view": copy.deepcopy(stored)}

    def _views_push(self, ctx: _Ctx) -> JSONDict:
        view = _check_view(ctx.params.get("view"), "modal")
        trigger = self._use_trigger(ctx.params.get("trigger_id"))
        stack = self._view_stacks.setdefault(trigger.user_id, [])
        if len(stack) >= 3:
            raise _ApiError("push_limit_reached")
        previous = self._views[stack[-1]].view if stack else None
        stored = self._new_view(ctx.app, view, previous=previous)
        self._views[stored["id"]] = _ViewRecord(stored, trigger.user_id, ctx.app.app_id)
        stack.append(stored["id"])
        return {"view": copy.deepcopy(stored)}

    def _views_update(self, ctx: _Ctx) -> JSONDict:
        view = _check_view(ctx.params.get("view"))
        view_id = ctx.params.get("view_id")
        external_id = ctx.params.get("external_id")
        record = self._views.get(str(view_id)) if view_id else None
        if record is None and external_id:
            record = next(
                (r for r in self._views.values() if r.view.get("external_id") == external_id),
                None,
            )
        if record is None or not record.is_open or record.app_id != ctx.app.app_id:
            raise _ApiError("not_found")
        expected_hash = ctx.params.get("hash")
        if expected_hash and expected_hash != record.view.get("hash"):
            raise _ApiError("hash_conflict")
        self._replace_view(record, view)
        return {"view": copy.deepcopy(record.view)}

    def _views_publish(self, ctx: _Ctx) -> JSONDict:
        user_id = ctx.params.get("user_id")
        if not isinstance(user_id, str) or user_id[:1] not in {"U", "W"}:
            raise _ApiError("invalid_arguments")
        view = _check_view(ctx.params.get("view"), "home")
        key = (user_id, ctx.app.app_id)
        existing = self._views.get(self._home_views.get(key, ""))
        expected_hash = ctx.params.get("hash")
        if existing is not None:
            if expected_hash and expected_hash != existing.view.get("hash"):
                raise _ApiError("hash_conflict")
            self._replace_view(existing, view)
            return {"view": copy.deepcopy(existing.view)}
        stored = self._new_view(ctx.app, view)
        self._views[stored["id"]] = _ViewRecord(stored, user_id, ctx.app.app_id)
        self._home_views[key] = stored["id"]
        return {"view": copy.deepcopy(stored)}

    def _user_answer(self, user: _User) -> JSONDict:
        return {
            "user": {
                "id": user.user_id,
                "team_id": user.team_id,
                "name": user.name,
                "deleted": False,
                "real_name": user.real_name,
                "profile": {
                    "email": user.email,
                    "real_name": user.real_name,
                    "display_name": user.name,
                },
                "is_bot": False,
                "is_app_user": False,
            }
        }

    def _users_info(self, ctx: _Ctx) -> JSONDict:
        user = self._users.get(str(ctx.params.get("user")))
        if user is None:
            raise _ApiError("user_not_found")
        return self._user_answer(user)

    def _users_lookup_by_email(self, ctx: _Ctx) -> JSONDict:
        email = str(ctx.params.get("email", "")).lower()
        for user in self._users.values():
            if user.email.lower() == email:
                return self._user_answer(user)
        raise _ApiError("users_not_found")
