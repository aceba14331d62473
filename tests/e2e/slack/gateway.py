"""The service and its people as the Slack stories use them: a gateway with a chat plugin,
linked reviewers, and ways to read the cards the bot posts."""

import base64
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope
from models.core.settings import Settings, resolve_secret_key
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user
from testing.postgres import free_port
from testing.processes import running_server
from testing.slack import SlackServer, buttons, text_of

BOT_TOKEN = "xoxb-1-accessgate-bot"
APP_TOKEN = "xapp-1-A0001-accessgate-app"
CHANNEL = "C0DBA"
REQUESTER, REVIEWER, STRANGER, UNLINKED = "U0RITA", "U0DAN", "U0EVE", "U0NEW"


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def chat_config(bot_token=BOT_TOKEN, app_token=APP_TOKEN, **more: str) -> dict:
    envvars = {"CHAT_BOT_TOKEN": b64(bot_token)}
    if app_token:
        envvars["CHAT_APP_TOKEN"] = b64(app_token)
    envvars.update({name: b64(value) for name, value in more.items()})
    return {"envvars": envvars}


@dataclass
class Gateway:
    """The service's API with the people of the stories."""

    api: httpx.Client
    admin: dict[str, str]
    requester: dict[str, str]
    reviewer: dict[str, str]
    stranger: dict[str, str]

    def open_session(self, script: str = "select * from payments") -> dict:
        response = self.api.post(
            "/sessions", json={"connection": "pg-prod", "script": script}, headers=self.requester
        )
        assert response.status_code == 201, response.text
        return response.json()

    def approve(self, session: dict, headers: dict[str, str] | None = None) -> dict:
        """Approve the session's review through the API, as the reviewer unless told otherwise."""
        response = self.api.put(
            f"/reviews/{session['review']['id']}",
            json={"status": "APPROVED"},
            headers=headers or self.reviewer,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def review(self, session: dict) -> dict:
        return self.api.get(f"/reviews/{session['id']}", headers=self.admin).json()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.api.close()

    def chat_status(self) -> dict:
        return self.api.get("/plugins/chat/status", headers=self.admin).json()

    def wait_for_state(self, state: str, timeout: float = 15) -> dict:
        deadline = time.monotonic() + timeout
        while (status := self.chat_status())["state"] != state:
            assert time.monotonic() < deadline, f"chat bot never {state}: {status}"
            time.sleep(0.05)
        return status


def bearer(
    environment, *, sub: str, name: str = "", email: str = "", groups: tuple[str, ...] = ()
) -> dict[str, str]:
    """A signed-in user; what `accessgate token` does, without a process per person."""
    settings = Settings(
        data_dir=environment["ACCESSGATE_DATA_DIR"],
        database_url=environment.get("ACCESSGATE_DATABASE_URL", ""),
    )
    engine = create_db_engine(settings.resolved_database_url())
    try:
        with db_scope(engine) as db:
            upsert_user(db=db, sub=sub, name=name, email=email, groups=list(groups))
    finally:
        engine.dispose()
    key = resolve_secret_key(settings)
    signed = issue_local_token(key=key, sub=sub, now=utc_now(), ttl=timedelta(hours=1))
    return {"Authorization": f"Bearer {signed}"}


def link(gateway: Gateway, headers: dict[str, str], chat_id: str) -> None:
    me = gateway.api.get("/users/me", headers=headers).json()
    response = gateway.api.patch(
        f"/users/{me['id']}", json={"chat_id": chat_id}, headers=gateway.admin
    )
    assert response.status_code == 200, response.text


def set_up_gateway(environment, server: str, *, config: dict | None = None) -> Gateway:
    gateway = Gateway(
        api=httpx.Client(base_url=server, timeout=30),
        admin=bearer(environment, sub="admin", name="Ada Admin", groups=("admin",)),
        requester=bearer(
            environment,
            sub="rita",
            name="Rita Requester",
            email="rita@example.com",
            groups=("dev",),
        ),
        reviewer=bearer(environment, sub="dan", name="Dan Reviewer", groups=("dba",)),
        stranger=bearer(environment, sub="eve", name="Eve Stranger", groups=("qa",)),
    )
    api, admin = gateway.api, gateway.admin
    assert api.post("/connections", json={"name": "pg-prod", "type": "database"}, headers=admin)
    review_plugin = {"name": "review", "connections": [{"name": "pg-prod", "config": ["dba"]}]}
    assert api.post("/plugins", json=review_plugin, headers=admin).status_code == 201
    for headers, chat_id in (
        (gateway.requester, REQUESTER),
        (gateway.reviewer, REVIEWER),
        (gateway.stranger, STRANGER),
    ):
        link(gateway, headers, chat_id)
    chat = {
        "name": "chat",
        "connections": [{"name": "pg-prod", "config": [CHANNEL]}],
        "config": config or chat_config(),
    }
    created = api.post("/plugins", json=chat, headers=admin)
    assert created.status_code == 201, created.text
    return gateway


@contextmanager
def serving_gateway(environment: dict[str, str], log: Path) -> Iterator[Gateway]:
    """A server of its own for a story that changes the environment, its bot connected."""
    with (
        running_server(environment, free_port(), log) as server,
        set_up_gateway(environment, server) as gateway,
    ):
        gateway.wait_for_state("connected")
        yield gateway


def card_of(slack: SlackServer, session: dict, channel: str = CHANNEL, timeout: float = 10):
    """The one card of this session's review in ``channel`` (waits for it)."""
    review_id = session["review"]["id"]

    def cards():
        return [m for m in slack.messages(channel) if review_id in text_of(m)]

    slack.wait_for(cards, timeout, message=f"no card for review {review_id} in {channel}")
    found = cards()
    assert len(found) == 1, f"{len(found)} cards for one review in {channel}"
    return found[0]


def action_ids(message) -> list[str]:
    return [button["action_id"] for button in buttons(message)]


def wait_for_text(slack: SlackServer, channel: str, ts: str, fragment: str) -> None:
    slack.wait_for(
        lambda: fragment in text_of(slack.message(channel, ts)),
        message=f"the card never said {fragment!r}",
    )


def database_url_of(environment: dict[str, str]) -> str:
    """The database the server of ``environment`` uses."""
    return environment.get("ACCESSGATE_DATABASE_URL") or (
        f"sqlite:///{environment['ACCESSGATE_DATA_DIR']}/accessgate.db"
    )


def undelivered_events(environment: dict[str, str]) -> int:
    """Outbox events no deliverer has finished: until none are left, posts may still come."""
    engine = create_db_engine(database_url_of(environment))
    try:
        with engine.connect() as connection:
            query = text("SELECT count(*) FROM outbox_event WHERE delivered_at IS NULL")
            return int(connection.execute(query).scalar_one())
    finally:
        engine.dispose()


def decisions_in_database(environment, review_id: str) -> list[tuple[str, str]]:
    url = database_url_of(environment)
    engine = create_db_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT door, decision FROM review_decision WHERE review_id = :id "
                    "ORDER BY created_at"
                ),
                {"id": review_id.replace("-", "") if url.startswith("sqlite") else review_id},
            )
            return [(door, decision) for door, decision in rows]
    finally:
        engine.dispose()


def wait_for_modal_text(slack: SlackServer, view_id: str, expected: str) -> None:
    """Wait until the modal the person is looking at says ``expected``."""
    slack.wait_for(
        lambda: expected in text_of(slack.view(view_id)),
        message=f"the modal never said {expected!r}",
    )
