"""Setting the benchmark up: the Slack workspace, the people, the bot configured through the API."""

import base64
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpx

from bench.harness import (
    ADMIN_SUB,
    REQUESTER_SUB,
    REVIEWER_SUB,
    server_env,
)
from bench.slack.records import (
    APP_TOKEN,
    BOT_TOKEN,
    CHANNELS,
    CONNECT_TIMEOUT_SECONDS,
    POLL_SECONDS,
    REQUESTER_CHAT_ID,
    REVIEWER_CHAT_ID,
    REVIEWER_GROUP,
    SLACK_BURST,
    SLACK_MESSAGES_PER_SECOND,
    People,
    channel_id,
    connection_name,
)
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope, upgrade_database
from models.core.settings import Settings, resolve_secret_key
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user
from testing.slack import SlackServer


@contextmanager
def slack_workspace() -> Iterator[SlackServer]:
    """The Slack-compatible server with the bot's app, both people and Slack's pace enforced."""
    with SlackServer() as slack:
        slack.add_app(bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        slack.add_user(REQUESTER_CHAT_ID, "rita", "rita@example.com", "Rita Requester")
        slack.add_user(REVIEWER_CHAT_ID, "dan", "dan@example.com", "Dan Reviewer")
        slack.pace_channels(SLACK_MESSAGES_PER_SECOND, burst=SLACK_BURST)
        yield slack


def slack_server_env(settings: Settings, slack: SlackServer) -> dict[str, str]:
    """The server's environment, with the bot pointed at the local Slack and its pace default."""
    env = server_env(settings)
    env["ACCESSGATE_SLACK_API_URL"] = slack.base_url
    return env


def create_people(settings: Settings) -> People:
    """The admin, the requester and the reviewer in the database, and their bearer headers."""
    engine = create_db_engine(settings.resolved_database_url())
    try:
        upgrade_database(engine)
        with db_scope(engine) as db:
            upsert_user(db=db, sub=ADMIN_SUB, name="Ada Admin", groups=["admin"])
            upsert_user(
                db=db,
                sub=REQUESTER_SUB,
                name="Rita Requester",
                email="rita@example.com",
                groups=["dev"],
            )
            upsert_user(db=db, sub=REVIEWER_SUB, name="Dan Reviewer", groups=[REVIEWER_GROUP])
    finally:
        engine.dispose()
    return People(
        admin=bearer(settings, ADMIN_SUB),
        requester=bearer(settings, REQUESTER_SUB),
        reviewer=bearer(settings, REVIEWER_SUB),
    )


def bearer(settings: Settings, sub: str) -> dict[str, str]:
    """Authorization headers for ``sub``, signed with the server's key."""
    token = issue_local_token(
        key=resolve_secret_key(settings), sub=sub, now=utc_now(), ttl=timedelta(hours=1)
    )
    return {"Authorization": f"Bearer {token}"}


def set_up_chat(api: httpx.Client, slack: SlackServer, people: People) -> None:
    """Link both Slack accounts, create the connections and plugins, wait for the bot."""
    link_chat_account(api, people.admin, people.requester, REQUESTER_CHAT_ID)
    link_chat_account(api, people.admin, people.reviewer, REVIEWER_CHAT_ID)
    for index in range(CHANNELS):
        created = api.post(
            "/connections",
            json={"name": connection_name(index), "type": "database"},
            headers=people.admin,
        )
        expect_status(created, 201)
    review_plugin = {
        "name": "review",
        "connections": [
            {"name": connection_name(index), "config": [REVIEWER_GROUP]}
            for index in range(CHANNELS)
        ],
    }
    expect_status(api.post("/plugins", json=review_plugin, headers=people.admin), 201)
    chat_plugin = {
        "name": "chat",
        "connections": [
            {"name": connection_name(index), "config": [channel_id(index)]}
            for index in range(CHANNELS)
        ],
        "config": {"envvars": {"CHAT_BOT_TOKEN": b64(BOT_TOKEN), "CHAT_APP_TOKEN": b64(APP_TOKEN)}},
    }
    expect_status(api.post("/plugins", json=chat_plugin, headers=people.admin), 201)
    wait_until_connected(api, people.admin)
    slack.wait_connected(APP_TOKEN, timeout=CONNECT_TIMEOUT_SECONDS)


def link_chat_account(
    api: httpx.Client, admin: dict[str, str], person: dict[str, str], chat_id: str
) -> None:
    """What an admin does for a user who has not linked their Slack account themselves."""
    me = api.get("/users/me", headers=person)
    expect_status(me, 200)
    patched = api.patch(f"/users/{me.json()['id']}", json={"chat_id": chat_id}, headers=admin)
    expect_status(patched, 200)


def wait_until_connected(api: httpx.Client, admin: dict[str, str]) -> None:
    """Return once the chat plugin's status says connected; raise if it never does."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
    while True:
        status = api.get("/plugins/chat/status", headers=admin).json()
        if status.get("state") == "connected":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the chat bot did not connect: {status}")
        time.sleep(POLL_SECONDS)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def expect_status(response: httpx.Response, status: int) -> None:
    """Setting up must work; a benchmark of a half-configured bot would measure nothing."""
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} answered "
            f"{response.status_code}: {response.text}"
        )
