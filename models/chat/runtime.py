"""What the API needs from the chat bot, without knowing how it talks to the chat service.

The process that serves both wires a bot implementing ``ChatRuntime`` into the API at start-up;
``models`` and ``api`` never import the bot.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Protocol

import pydantic
import pydantic.dataclasses
from sqlalchemy import Engine

from models.chat.channel_health import ChannelHealth
from models.core.sealing import SecretBox
from models.plugins.schema import PluginName
from models.plugins.service import LiveCheck


class ChatState(StrEnum):
    STOPPED = "stopped"  # no chat configuration
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RETRYING = "retrying"  # the chat service cannot be reached; trying again with backoff
    FAILED = "failed"  # the chat service refused the configuration; a new one is needed


# A pydantic dataclass: the bot builds it as a plain record, the API answers it as it is.
@pydantic.dataclasses.dataclass(frozen=True)
class ChatStatus:
    """How the bot is doing, as an admin sees it."""

    state: Annotated[
        ChatState,
        pydantic.Field(
            description="stopped: not configured; connecting; connected; retrying: Slack cannot "
            "be reached, trying again with backoff; failed: Slack refused the configuration."
        ),
    ]
    mode: Annotated[str | None, pydantic.Field(description="socket or http")]
    team: str | None
    team_id: str | None
    bot_user_id: str | None
    last_error: str | None
    since: datetime
    channels: Annotated[
        list[ChannelHealth],
        pydantic.Field(
            description="Each channel the bot posted or tried to post to, failing ones first: "
            "the connection can be fine while every post to one channel fails."
        ),
    ] = field(default_factory=list)


@dataclass(frozen=True)
class SignedChatRequest:
    """An HTTP request from the chat service, passed on untouched (its signature covers it)."""

    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True)
class ChatResponse:
    status: int
    body: bytes
    headers: Mapping[str, str]


class ChatRuntime(Protocol):
    """The chat bot as the API sees it."""

    def check_configuration(self, values: Mapping[str, bytes]) -> None:
        """Ask the chat service whether it accepts these tokens; raise UnusableConfiguration.

        Returns normally when the service accepts them or cannot be reached (the configuration
        is then stored and the bot keeps retrying). Called from a worker thread.
        """

    def configuration_changed(self) -> None:
        """The stored configuration changed (or was removed); apply it. Thread-safe, quick."""

    def status(self) -> ChatStatus:
        """The current state of the bot."""

    async def handle_http(self, request: SignedChatRequest) -> ChatResponse:
        """Answer a request the chat service sent to the HTTP endpoint."""

    async def start(self) -> None:
        """Apply the stored configuration and start delivering (at service start-up)."""

    async def stop(self) -> None:
        """Disconnect and stop delivering; undelivered events stay in the outbox."""


# Builds the bot once the service has its engine and cipher (inside the app's lifespan).
ChatRuntimeFactory = Callable[[Engine, SecretBox], ChatRuntime]


def configuration_check(chat: ChatRuntime | None) -> LiveCheck | None:
    """The check of a plugin configuration against Slack, when this process runs the bot."""
    if chat is None:
        return None

    def check(name: PluginName, values: Mapping[str, bytes]) -> None:
        if name is PluginName.CHAT:
            chat.check_configuration(values)

    return check


def plugin_changed(chat: ChatRuntime | None, name: str) -> None:
    """Let the bot apply a stored change of the chat plugin at once."""
    if chat is not None and name == PluginName.CHAT:
        chat.configuration_changed()
