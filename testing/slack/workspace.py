"""The loopback Slack workspace's state, and what tests read of it."""

from __future__ import annotations

import asyncio
import copy
import itertools
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

import httpx

from testing.slack.background import BackgroundServer
from testing.slack.blocks import text_of
from testing.slack.records import (
    BOT_SCOPES,
    DEFAULT_APP_TOKEN,
    DEFAULT_BOT_TOKEN,
    RESPONSE_URL_TTL_SECONDS,
    Ack,
    AppRecord,
    Bucket,
    Call,
    Failure,
    Message,
    ResponseTarget,
    SocketConnection,
    Trigger,
    UserRecord,
    ViewRecord,
    new_id,
)

JSONDict = dict[str, Any]


class Workspace:
    """The workspace's state: apps, tokens, users, channels, and everything recorded.

    Every public method is synchronous and thread-safe (one condition guards the state).
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
        # How long a response_url works (Slack: thirty minutes); 0 makes every one expired.
        self.response_url_ttl: float = RESPONSE_URL_TTL_SECONDS
        self._cond = threading.Condition()
        self._apps: dict[str, AppRecord] = {}
        self._tokens: dict[str, tuple[AppRecord, Literal["bot", "app"]]] = {}
        self._revoked: set[str] = set()
        self._users: dict[str, UserRecord] = {}
        self._channel_names: dict[str, str] = {}
        self._removed_channels: set[str] = set()
        self._channels_without_bot: set[str] = set()
        self._token_scopes: dict[str, frozenset[str]] = {}
        self._delays: dict[str, list[float]] = {}
        self._dm_users: dict[str, str] = {}
        self._messages: list[Message] = []
        self._messages_by_key: dict[tuple[str, str], Message] = {}
        self._ephemerals: dict[str, list[JSONDict]] = {}
        self._responses: list[JSONDict] = []
        self._views: dict[str, ViewRecord] = {}
        self._view_stacks: dict[str, list[str]] = {}
        self._home_views: dict[tuple[str, str], str] = {}
        self._triggers: dict[str, Trigger] = {}
        self._response_targets: dict[str, ResponseTarget] = {}
        self._calls: list[Call] = []
        self._failures: dict[str, list[Failure]] = {}
        self._pacing: tuple[float, int] | None = None
        self._buckets: dict[str, Bucket] = {}
        self._pacing_violations = 0
        self._last_ts_micros = 0
        self._tickets: dict[str, tuple[str, str]] = {}
        self._connections: list[SocketConnection] = []
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._pending_acks: dict[str, asyncio.Future[JSONDict]] = {}
        self._ack_hooks: dict[str, Callable[[Ack], None]] = {}
        self._http: httpx.AsyncClient | None = None
        self._background: BackgroundServer | None = None

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

    # ---- workspace state -------------------------------------------------------------------------

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
        bot_scopes: Iterable[str] = BOT_SCOPES,
    ) -> None:
        """Install an app; calling again with the same ``app_id`` adds tokens to it.

        ``bot_scopes`` are what the bot token was granted (``x-oauth-scopes`` of auth.test);
        a method needing another answers ``missing_scope``.
        """
        with self._cond:
            app = self._apps.get(app_id)
            if app is None:
                app = AppRecord(
                    app_id=app_id,
                    team_id=team_id,
                    team_name=team_name,
                    bot_user_id=bot_user_id,
                    bot_id=bot_id or "B" + app_id.removeprefix("A"),
                    bot_name=bot_name,
                    signing_secret=signing_secret or secrets.token_hex(16),
                    verification_token=verification_token or new_id("", 24).lower(),
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
                if kind == "bot":
                    self._token_scopes[token] = frozenset(bot_scopes)
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
            self._users[user_id] = UserRecord(user_id, name, email, real_name or name, team_id)

    def add_channel(self, channel_id: str, name: str) -> None:
        """Name a channel (any C…/G… id exists already); undoes remove_channel."""
        with self._cond:
            self._channel_names[channel_id] = name
            self._removed_channels.discard(channel_id)

    def remove_bot_from_channel(self, channel_id: str) -> None:
        """The bot is no longer a member: posting there answers ``not_in_channel``."""
        with self._cond:
            self._channels_without_bot.add(channel_id)

    def add_bot_to_channel(self, channel_id: str) -> None:
        """The bot is invited (back) into the channel; undoes remove_bot_from_channel."""
        with self._cond:
            self._channels_without_bot.discard(channel_id)

    def remove_channel(self, channel_id: str) -> None:
        """Calls naming this channel answer ``channel_not_found`` from now on."""
        with self._cond:
            self._removed_channels.add(channel_id)

    @staticmethod
    def dm_channel_id(user_id: str) -> str:
        """The id of the app's DM channel with ``user_id`` (stable)."""
        return "D" + (user_id[1:] if user_id[:1] in {"U", "W"} else user_id)

    # ---- failures and pacing ---------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: int = 1,
        times: int = 1,
        after_handling: bool = False,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail.

        ``status=429`` (the default without ``error``) answers HTTP 429 with ``Retry-After`` and
        ``ratelimited``; another status answers that HTTP status; ``error=...`` alone answers
        HTTP 200 ``{"ok": false, "error": error}``. ``after_handling``: the call takes effect
        (the message is posted) and only its answer is the failure, as when Slack's answer is
        lost on the way.
        """
        if status is None:
            status = 200 if error else 429
        if error is None:
            error = "ratelimited" if status == 429 else "internal_error"
        with self._cond:
            self._failures.setdefault(method, []).append(
                Failure(
                    status=status,
                    error=error,
                    retry_after=retry_after,
                    times=times,
                    after_handling=after_handling,
                )
            )

    def delay_next(self, method: str, seconds: float, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` answer only after ``seconds``."""
        with self._cond:
            self._delays.setdefault(method, []).extend([seconds] * times)

    def pace_channels(self, messages_per_second: float | None = 1.0, burst: int = 1) -> None:
        """Refuse chat.postMessage beyond ``messages_per_second`` per channel (None: off)."""
        with self._cond:
            self._pacing = None if messages_per_second is None else (messages_per_second, burst)
            self._buckets.clear()

    @property
    def pacing_violations(self) -> int:
        with self._cond:
            return self._pacing_violations

    # ---- recorded state --------------------------------------------------------------------------

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

    # ---- lookups every layer uses ----------------------------------------------------------------

    def _app_for_token(self, app_token: str) -> AppRecord:
        entry = self._tokens.get(app_token)
        if entry is None:
            raise LookupError(f"unknown token {app_token!r}")
        return entry[0]

    def _live_connections(self, app_id: str) -> list[SocketConnection]:
        return [c for c in self._connections if c.app_id == app_id and not c.closing]

    def _user_object(self, app: AppRecord, user_id: str) -> JSONDict:
        user = self._users.get(user_id)
        name = user.name if user else user_id.lower()
        return {"id": user_id, "username": name, "name": name, "team_id": app.team_id}

    def _team_object(self, app: AppRecord) -> JSONDict:
        return {"id": app.team_id, "domain": app.team_domain}

    def _channel_name(self, channel_id: str) -> str:
        if channel_id in self._channel_names:
            return self._channel_names[channel_id]
        return "directmessage" if channel_id.startswith("D") else channel_id.lower()
