"""The chat bot's supervisor: keeps one Slack connection matching the stored configuration.

    stored config --> supervisor --auth.test--> Slack
         ^                |  ok: new SlackConnection up, then the old one closed  (connected)
         |                |  Slack unreachable: old one kept, retried with backoff (retrying)
    PUT/DELETE            |  Slack refuses the tokens: old one kept, no retry      (failed)
    /api/plugins/chat     +- no configuration: everything closed                   (stopped)

Tokens Slack refuses never get stored in the first place: the API asks ``check_configuration``
before storing (422). The supervisor re-reads the configuration when told it changed, and every
half minute, so a change made through another process sharing the database is applied too.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta

import aiohttp
from slack_sdk.errors import SlackApiError
from sqlalchemy import Engine
from sqlmodel import Session

from bot.connection import ChatConfig, SlackConnection, SlackIdentity
from bot.database import Database
from bot.pacing import SlackPace
from bot.slack_api import check_chat_tokens, is_token_refusal
from models.chat.runtime import ChatResponse, ChatState, ChatStatus, SignedChatRequest
from models.core.clock import utc_now
from models.core.sealing import SecretBox
from models.core.settings import Settings
from models.delivery.outbox import on_committed_events
from models.plugins.schema import PluginName
from models.plugins.service import plugin_envvars
from models.users.service import default_organization

logger = logging.getLogger("accessgate.bot")

RECHECK_SECONDS = 30.0
FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
NOT_RUNNING = b'{"message": "the chat bot is not running: configure the chat plugin"}'


class ChatBot:
    """The Slack bot of this process (implements ``models.chat.runtime.ChatRuntime``)."""

    def __init__(
        self, *, settings: Settings, engine: Engine, secret_box: SecretBox, api_base_url: str
    ) -> None:
        self._settings = settings
        self._secret_box = secret_box
        self._api_base_url = api_base_url
        self._database = Database(engine)  # the supervisor's and the listeners' work
        # Delivery has threads of its own: a burst of clicks must not queue card updates.
        self._delivery_database = Database(engine)
        # Slack's pace has threads of its own too: the moment a post takes must not wait behind
        # the notifier's reads, or the post goes out late.
        self._pace_database = Database(engine)
        self._pace = SlackPace(self._pace_database, settings.slack_channel_messages_per_second)
        self._connection: SlackConnection | None = None
        self._refused: ChatConfig | None = None  # stored, but Slack will not take it
        self._identity: SlackIdentity | None = None  # who Slack said the bot is, last time
        self._status = ChatStatus(ChatState.STOPPED, None, None, None, None, None, utc_now())
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._remove_listener: Callable[[], None] = lambda: None
        self._closing: set[asyncio.Task[None]] = set()

    # -- ChatRuntime ----------------------------------------------------------------------------

    def check_configuration(self, values: Mapping[str, bytes]) -> None:
        """Ask Slack about new tokens before they are stored (worker thread)."""
        check_chat_tokens(
            values,
            api_url=self._settings.slack_api_url,
            match_email=self._settings.slack_match_email,
        )

    def configuration_changed(self) -> None:
        """Apply the stored configuration now (any thread)."""
        if self._loop is not None and self._changed is not None:
            self._loop.call_soon_threadsafe(self._changed.set)

    def status(self) -> ChatStatus:
        """Connected or not, to which team, and the last error."""
        return self._status

    async def handle_http(self, request: SignedChatRequest) -> ChatResponse:
        """Slack's HTTP mode, answered by the current connection."""
        connection = self._connection
        if connection is None:
            return ChatResponse(404, NOT_RUNNING, {"content-type": "application/json"})
        return await connection.handle_http(request)

    async def start(self) -> None:
        """Start supervising (the first connection is made in the background)."""
        loop = self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

        def wake_notifier_from_any_thread() -> None:
            loop.call_soon_threadsafe(self._wake_notifier)

        self._remove_listener = on_committed_events(wake_notifier_from_any_thread)
        self._task = asyncio.create_task(self._supervise(), name="chat-supervisor")

    async def stop(self) -> None:
        """Close the connection; undelivered events wait in the outbox for the next start."""
        self._remove_listener()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
        self._database.close()
        self._delivery_database.close()
        self._pace_database.close()

    # -- supervising ----------------------------------------------------------------------------

    def _wake_notifier(self) -> None:
        if self._connection is not None:
            self._connection.wake_notifier()

    async def _supervise(self) -> None:
        assert self._changed is not None
        retry_in = FIRST_RETRY_SECONDS
        while True:
            self._changed.clear()
            wait = RECHECK_SECONDS
            try:
                wanted = await self._database.run(self._stored_config)
            except Exception:
                logger.exception("could not read the chat configuration")
                wanted = self._connection.config if self._connection else None
            if wanted is None:
                await self._close_connection()
            elif wanted != self._refused and (
                self._connection is None or self._connection.config != wanted
            ):
                if await self._switch_to(wanted):
                    retry_in = FIRST_RETRY_SECONDS
                else:
                    wait, retry_in = retry_in, min(retry_in * 2, MAX_RETRY_SECONDS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)

    def _stored_config(self, db: Session) -> ChatConfig | None:
        values = plugin_envvars(
            db=db,
            organization_id=default_organization(db).id,
            name=PluginName.CHAT,
            secret_box=self._secret_box,
        )
        return None if not values else ChatConfig.from_envvars(values)

    async def _switch_to(self, config: ChatConfig) -> bool:
        """Bring up a connection for ``config``; False when it should be tried again later."""
        self._set_status(ChatState.CONNECTING, config, error=self._status.last_error)
        connection = SlackConnection(
            config=config,
            api_url=self._settings.slack_api_url,
            database=self._database,
            delivery_database=self._delivery_database,
            api_base_url=self._api_base_url,
            pace=self._pace,
            lease_period=timedelta(seconds=self._settings.outbox_lease_seconds),
            match_email=self._settings.slack_match_email,
            on_token_refused=self._token_refused,
        )
        try:
            identity = await connection.open()
        except SlackApiError as exc:
            if is_token_refusal(exc):
                self._refused = config
                self._set_status(ChatState.FAILED, config, error=f"Slack refused: {exc}")
                return True
            self._set_status(ChatState.RETRYING, config, error=f"Slack answered: {exc}")
            return False
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._set_status(ChatState.RETRYING, config, error=f"Slack cannot be reached: {exc}")
            return False
        old, self._connection, self._refused = self._connection, connection, None
        if old is not None:
            await old.close()
        self._set_status(ChatState.CONNECTED, config, identity=identity)
        logger.info("chat bot connected to %s (%s mode)", identity.team, config.mode)
        return True

    async def _close_connection(self) -> None:
        self._refused = None
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
        if self._status.state is not ChatState.STOPPED:
            self._set_status(ChatState.STOPPED, None)

    def _token_refused(self, error: str) -> None:
        """Slack stopped taking the bot token mid-delivery (revoked, app uninstalled)."""
        connection = self._connection
        if connection is None or self._refused == connection.config:
            return
        self._refused = connection.config
        self._set_status(ChatState.FAILED, connection.config, error=f"Slack refused: {error}")
        self._connection = None
        closing = asyncio.get_running_loop().create_task(connection.close())
        self._closing.add(closing)  # the loop keeps only a weak reference to tasks
        closing.add_done_callback(self._closing.discard)

    def _set_status(
        self,
        state: ChatState,
        config: ChatConfig | None,
        *,
        error: str | None = None,
        identity: SlackIdentity | None = None,
    ) -> None:
        if identity is not None:
            self._identity = identity
        if state is ChatState.STOPPED:
            self._identity = None
        known = self._identity
        self._status = ChatStatus(
            state=state,
            mode=None if config is None else config.mode,
            team=None if known is None else known.team,
            team_id=None if known is None else known.team_id,
            bot_user_id=None if known is None else known.bot_user_id,
            last_error=error,
            since=utc_now(),
        )
