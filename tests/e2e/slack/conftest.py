"""Fixtures of the Slack stories: the Slack-compatible server and a gateway whose bot talks
to it."""

from collections.abc import Iterator

import pytest

from testing.slack import SlackServer
from tests.e2e.slack.gateway import (
    APP_TOKEN,
    BOT_TOKEN,
    REQUESTER,
    REVIEWER,
    STRANGER,
    UNLINKED,
    Gateway,
    set_up_gateway,
)


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    with SlackServer() as server:
        server.add_app(bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        server.add_user(REQUESTER, "rita", "rita@example.com", "Rita Requester")
        server.add_user(REVIEWER, "dan", "dan@example.com", "Dan Reviewer")
        server.add_user(STRANGER, "eve", "eve@example.com", "Eve Stranger")
        server.add_user(UNLINKED, "nora", "nora@example.com", "Nora New")
        yield server


@pytest.fixture
def environment(environment, slack) -> dict[str, str]:
    environment["ACCESSGATE_SLACK_API_URL"] = slack.base_url
    # Cards of these tests go out at once; pacing has a test (and a benchmark) of its own.
    environment["ACCESSGATE_SLACK_CHANNEL_MESSAGES_PER_SECOND"] = "100"
    return environment


@pytest.fixture
def gateway(environment, server, slack) -> Iterator[Gateway]:
    with set_up_gateway(environment, server) as gateway:
        gateway.wait_for_state("connected")
        slack.wait_connected(APP_TOKEN)
        yield gateway
