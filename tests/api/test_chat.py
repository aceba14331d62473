"""The chat bot's API doors when no bot runs in the process, and linking through the API."""

import pytest

from models.chat.links import start_chat_link
from models.core.clock import utc_now
from models.core.db import db_scope
from tests.factories import make_user


def test_the_status_is_for_admins_and_says_when_no_bot_runs(client, engine, admin):
    bob = make_user(engine, "bob", ["dba"])

    assert client.get("/api/plugins/chat/status").status_code == 401
    assert client.get("/api/plugins/chat/status", headers=bob.headers).status_code == 403
    response = client.get("/api/plugins/chat/status", headers=admin.headers)
    assert response.status_code == 412
    assert response.json() == {"message": "this process does not run the chat bot"}


def test_slack_events_without_a_bot_are_refused_with_a_message(client):
    response = client.post("/slack/events", content=b"payload=%7B%7D")

    assert response.status_code == 412
    assert response.json()["message"] == "this process does not run the chat bot"


def test_a_link_code_links_the_caller_once(client, engine):
    bob = make_user(engine, "bob", ["dba"])
    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0BOB", now=utc_now())

    linked = client.post("/api/users/me/chat-link", json={"code": code}, headers=bob.headers)
    again = client.post("/api/users/me/chat-link", json={"code": code}, headers=bob.headers)

    assert linked.status_code == 200
    assert linked.json()["chat_id"] == "U0BOB"
    assert client.get("/api/users/me", headers=bob.headers).json()["chat_id"] == "U0BOB"
    assert again.status_code == 400
    assert "used or expired" in again.json()["message"]


@pytest.mark.parametrize("body", [{}, {"code": ""}, {"code": "x" * 65}, {"code": 12}, []])
def test_a_malformed_link_request_is_400(client, engine, body):
    bob = make_user(engine, "bob", ["dba"])

    response = client.post("/api/users/me/chat-link", json=body, headers=bob.headers)

    assert response.status_code == 400
    assert response.json()["message"]
    assert client.get("/api/users/me", headers=bob.headers).json()["chat_id"] is None
