"""One live set of Slack tokens: the Web API client, the Bolt app, Socket Mode and the notifier.

A token swap builds a new ``SlackConnection`` next to the old one and closes the old one only
once the new one is up, so a configuration Slack will not take never leaves the bot deaf.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aiohttp
import structlog
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from bot.database import Database
from bot.fresh_views import ViewRefresher
from bot.listeners import BotContext, register_listeners
from bot.notifier import Notifier
from bot.pacing import SlackPace
from bot.slack_api import poster_client, web_client
from models.chat.runtime import ChatResponse, SignedChatRequest
from models.plugins.config import (
    CHAT_APP_TOKEN,
    CHAT_BOT_TOKEN,
    CHAT_DEFAULT_CHANNEL,
    CHAT_SIGNING_SECRET,
)

logger = logging.getLogger("accessgate.bot")

UNSIGNED_REQUEST = (
    b'{"message": "the request is not signed with the chat plugin\'s CHAT_SIGNING_SECRET, '
    b'or is older than 5 minutes"}'
)
HTTP_MODE_OFF = b'{"message": "HTTP mode is off: the chat plugin has no CHAT_SIGNING_SECRET"}'


class EnvelopeLogging(AsyncSocketModeHandler):
    """Socket Mode, with each envelope's id on every log line its handling writes."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        with structlog.contextvars.bound_contextvars(slack_envelope_id=req.envelope_id):
            await super().handle(client, req)


@dataclass(frozen=True)
class ChatConfig:
    """The chat plugin's configuration, decoded."""

    bot_token: str
    app_token: str | None
    signing_secret: str | None
    default_channel: str | None

    @classmethod
    def from_envvars(cls, values: dict[str, bytes]) -> "ChatConfig":
        """Read the (already validated) plugin variables."""

        def text(name: str) -> str | None:
            value = values.get(name)
            return None if value is None else value.decode("utf-8")

        return cls(
            bot_token=text(CHAT_BOT_TOKEN) or "",
            app_token=text(CHAT_APP_TOKEN),
            signing_secret=text(CHAT_SIGNING_SECRET),
            default_channel=text(CHAT_DEFAULT_CHANNEL),
        )

    @property
    def mode(self) -> str:
        return "socket" if self.app_token else "http"


@dataclass(frozen=True)
class SlackIdentity:
    team: str
    team_id: str
    bot_user_id: str


class SlackConnection:
    """Everything that talks to Slack with one configuration."""

    def __init__(
        self,
        *,
        config: ChatConfig,
        api_url: str,
        database: Database,
        delivery_database: Database,
        api_base_url: str,
        pace: SlackPace,
        lease_period: timedelta,
        match_email: bool,
        on_token_refused: Callable[[str], None],
    ) -> None:
        self.config = config
        self._api_url = api_url
        self._database = database
        self._delivery_database = delivery_database
        self._api_base_url = api_base_url
        self._pace = pace
        self._lease_period = lease_period
        self._match_email = match_email
        self._on_token_refused = on_token_refused
        self._http: aiohttp.ClientSession | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._notifier: Notifier | None = None
        self._views: ViewRefresher | None = None
        self.app: AsyncApp | None = None

    async def open(self) -> SlackIdentity:
        """Check the bot token with Slack, connect Socket Mode, start delivering.

        Raises SlackApiError when Slack refuses, aiohttp errors when it cannot be reached.
        """
        # One HTTP connection pool for every call made with these tokens.
        self._http = aiohttp.ClientSession()
        try:
            client = web_client(token=self.config.bot_token, api_url=self._api_url)
            client.session = self._http
            identity = await client.auth_test()
            self.app = AsyncApp(
                client=client,
                signing_secret=self.config.signing_secret or "",
                request_verification_enabled=bool(self.config.signing_secret),
                logger=logging.getLogger("accessgate.bot.bolt"),
            )
            register_listeners(
                self.app,
                BotContext(
                    database=self._database,
                    api_base_url=self._api_base_url,
                    match_email=self._match_email,
                ),
            )
            if self.config.app_token:
                self._socket = EnvelopeLogging(self.app, self.config.app_token)
                await self._socket.connect_async()  # type: ignore[no-untyped-call]
            self._views = ViewRefresher(
                database=self._delivery_database, client=client, api_base_url=self._api_base_url
            )
            self._views.start()
            poster = poster_client(token=self.config.bot_token, api_url=self._api_url)
            poster.session = self._http
            self._notifier = Notifier(
                database=self._delivery_database,
                client=client,
                poster=poster,
                pace=self._pace,
                views=self._views,
                api_base_url=self._api_base_url,
                default_channel=self.config.default_channel,
                lease_period=self._lease_period,
                on_token_refused=self._on_token_refused,
            )
            self._notifier.start()
        except BaseException:
            await self.close()
            raise
        return SlackIdentity(
            team=str(identity.get("team") or ""),
            team_id=str(identity.get("team_id") or ""),
            bot_user_id=str(identity.get("user_id") or ""),
        )

    def wake_notifier(self) -> None:
        """New outbox events were committed in this process."""
        if self._notifier is not None:
            self._notifier.wake()

    async def close(self) -> None:
        """Stop delivering and disconnect; safe to call more than once."""
        if self._notifier is not None:
            await self._notifier.stop()
            self._notifier = None
        if self._views is not None:
            await self._views.stop()
            self._views = None
        if self._socket is not None:
            try:
                await self._socket.close_async()  # type: ignore[no-untyped-call]
            except Exception:
                logger.exception("closing the Socket Mode connection failed")
            self._socket = None
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def handle_http(self, request: SignedChatRequest) -> ChatResponse:
        """Dispatch a signed request from Slack's HTTP mode to the Bolt app."""
        if self.app is None or not self.config.signing_secret:
            return ChatResponse(404, HTTP_MODE_OFF, {"content-type": "application/json"})
        answer = await self.app.async_dispatch(
            AsyncBoltRequest(
                body=request.body.decode("utf-8", "replace"), headers=dict(request.headers)
            )
        )
        if answer.status == 401:
            return ChatResponse(401, UNSIGNED_REQUEST, {"content-type": "application/json"})
        headers: dict[str, Any] = {
            name: values[0] for name, values in answer.headers.items() if values
        }
        return ChatResponse(answer.status, answer.body.encode(), headers)
