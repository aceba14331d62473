"""Plugins: top-level configuration sealed at rest and REDACTED everywhere, and access control."""

import base64
import json

import pytest
from sqlalchemy import text

from models.core.db import db_scope
from models.core.sealing import SecretBox
from models.plugins.schema import PluginName
from models.plugins.service import plugin_envvars
from models.users.service import default_organization
from tests.factories import TEST_SECRET_KEY, make_connection, make_user

APP_TOKEN = "xapp-1-A0123456789-1234567890123-abcdefabcdef0123456789"
BOT_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


CHAT_CONFIG = {"envvars": {"CHAT_APP_TOKEN": b64(APP_TOKEN), "CHAT_BOT_TOKEN": b64(BOT_TOKEN)}}


@pytest.fixture
def chat_plugin(client, admin):
    response = client.post("/api/plugins", json={"name": "chat"}, headers=admin.headers)
    assert response.status_code == 201, response.text
    return response.json()


def stored_envvars(engine, name: str) -> dict[str, bytes] | None:
    with db_scope(engine) as db:
        return plugin_envvars(
            db=db,
            organization_id=default_organization(db).id,
            name=PluginName(name),
            secret_box=SecretBox(TEST_SECRET_KEY.encode()),
        )


def stored_value(engine, name: str, key: str) -> bytes:
    """One stored configuration value of a plugin, which must have a configuration."""
    stored = stored_envvars(engine, name)
    assert stored is not None, f"the {name} plugin has no stored configuration"
    return stored[key]


def test_put_config_answers_the_plugin_with_values_redacted(client, engine, admin, chat_plugin):
    response = client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == chat_plugin["id"]
    assert body["name"] == "chat"
    assert body["config"] == {
        "id": chat_plugin["config"]["id"],
        "envvars": {"CHAT_APP_TOKEN": "REDACTED", "CHAT_BOT_TOKEN": "REDACTED"},
    }
    assert body["connections"] == []
    assert body["priority"] == 0
    assert body["source"] is None
    # The plugin that needs the values gets them, decrypted, in-process.
    assert stored_envvars(engine, "chat") == {
        "CHAT_APP_TOKEN": APP_TOKEN.encode(),
        "CHAT_BOT_TOKEN": BOT_TOKEN.encode(),
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_values_are_encrypted_at_rest(client, engine, admin, chat_plugin):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    with engine.connect() as connection:
        row = connection.execute(text("SELECT * FROM plugin WHERE name = 'chat'")).mappings().one()
    raw = json.dumps({key: str(value) for key, value in row.items()})
    for secret in (APP_TOKEN, BOT_TOKEN):
        assert secret not in raw
        assert b64(secret) not in raw
        assert secret[:12] not in raw
    assert stored_value(engine, "chat", "CHAT_BOT_TOKEN") == BOT_TOKEN.encode()


def test_values_are_redacted_in_every_response(client, admin):
    created = client.post(
        "/api/plugins", json={"name": "chat", "config": CHAT_CONFIG}, headers=admin.headers
    )
    updated = client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)
    connections = client.put("/api/plugins/chat", json={"connections": []}, headers=admin.headers)
    fetched = client.get("/api/plugins/chat", headers=admin.headers)
    listed = client.get("/api/plugins", headers=admin.headers)

    redacted = {"CHAT_APP_TOKEN": "REDACTED", "CHAT_BOT_TOKEN": "REDACTED"}
    for response in (created, updated, connections, fetched):
        assert response.status_code in (200, 201), response.text
        assert response.json()["config"]["envvars"] == redacted
    assert [plugin["config"]["envvars"] for plugin in listed.json()] == [redacted]
    for response in (created, updated, connections, fetched, listed):
        for secret in (APP_TOKEN, BOT_TOKEN):
            assert secret not in response.text
            assert b64(secret) not in response.text


def test_a_new_configuration_replaces_the_old_one(client, engine, admin, chat_plugin):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)
    new_config = {
        "envvars": {
            "CHAT_APP_TOKEN": b64("xapp-new"),
            "CHAT_BOT_TOKEN": b64("xoxb-new"),
            "CHAT_DEFAULT_CHANNEL": b64("C0123"),
        }
    }

    response = client.put("/api/plugins/chat/config", json=new_config, headers=admin.headers)

    assert response.status_code == 200
    assert sorted(response.json()["config"]["envvars"]) == [
        "CHAT_APP_TOKEN",
        "CHAT_BOT_TOKEN",
        "CHAT_DEFAULT_CHANNEL",
    ]
    assert stored_envvars(engine, "chat") == {
        "CHAT_APP_TOKEN": b"xapp-new",
        "CHAT_BOT_TOKEN": b"xoxb-new",
        "CHAT_DEFAULT_CHANNEL": b"C0123",
    }


@pytest.mark.parametrize(
    ("envvars", "fragment"),
    [
        ({"1BAD": b64("x")}, "'1BAD' is not an environment-variable name"),
        ({"HAS-DASH": b64("x")}, "'HAS-DASH' is not an environment-variable name"),
        ({"": b64("x")}, "key '' is not an environment-variable name"),
        ({"A" * 129: b64("x")}, "is longer than 128 characters"),
        ({"TOKEN": "not base64!"}, "the value of TOKEN is not valid standard base64"),
        ({"TOKEN": "YWJj ZA=="}, "the value of TOKEN is not valid standard base64"),
        ({"TOKEN": "YWJjZA"}, "the value of TOKEN is not valid standard base64"),
        ({"TOKEN": "_-8="}, "the value of TOKEN is not valid standard base64"),
        ({"TOKEN": "YR=="}, "the value of TOKEN is not valid standard base64"),
        ({"TOKEN": "ZéZé"}, "the value of TOKEN is not valid standard base64"),
        (
            {"BIG": base64.b64encode(b"x" * (100 * 1024 + 1)).decode()},
            "the value of BIG is over 100 KB decoded",
        ),
        ({"TOKEN": 42}, "body.envvars.TOKEN"),
    ],
)
def test_malformed_envvars_are_400_naming_the_key(
    client, engine, admin, chat_plugin, envvars, fragment
):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    response = client.put(
        "/api/plugins/chat/config", json={"envvars": envvars}, headers=admin.headers
    )

    assert response.status_code == 400
    assert fragment in response.json()["message"]
    assert stored_value(engine, "chat", "CHAT_BOT_TOKEN") == BOT_TOKEN.encode()


def test_a_value_of_exactly_100_kb_is_accepted(client, engine, admin):
    client.post("/api/plugins", json={"name": "webhooks"}, headers=admin.headers)
    value = bytes(range(256)) * 400  # 102,400 bytes

    response = client.put(
        "/api/plugins/webhooks/config",
        json={"envvars": {"WEBHOOK_CA": base64.b64encode(value).decode()}},
        headers=admin.headers,
    )

    assert response.status_code == 200, response.text
    assert stored_envvars(engine, "webhooks") == {"WEBHOOK_CA": value}


@pytest.mark.parametrize(
    "body",
    [{}, {"envvars": []}, {"envvars": "x"}, {"envvars": {}, "extra": 1}, [], None],
)
def test_a_malformed_body_is_400(client, admin, chat_plugin, body):
    response = client.put("/api/plugins/chat/config", json=body, headers=admin.headers)

    assert response.status_code == 400
    assert response.json()["message"]


@pytest.mark.parametrize(
    ("envvars", "fragment"),
    [
        ({}, "needs CHAT_BOT_TOKEN; it is missing"),
        (
            {"CHAT_BOT_TOKEN": b64(BOT_TOKEN)},
            "needs CHAT_APP_TOKEN (Socket Mode) or CHAT_SIGNING_SECRET (HTTP mode)",
        ),
        ({"CHAT_APP_TOKEN": b64(APP_TOKEN)}, "needs CHAT_BOT_TOKEN; it is missing"),
        (
            {"CHAT_BOT_TOKEN": b64(BOT_TOKEN), "CHAT_SIGNING_SECRET": b64("has a space")},
            "CHAT_SIGNING_SECRET must be the app's signing secret",
        ),
        (
            {
                "CHAT_BOT_TOKEN": b64(BOT_TOKEN),
                "CHAT_APP_TOKEN": b64(APP_TOKEN),
                "CHAT_DEFAULT_CHANNEL": b64("#general"),
            },
            "CHAT_DEFAULT_CHANNEL must be a channel id such as C0123456789, not a name",
        ),
        (
            {"CHAT_APP_TOKEN": b64(BOT_TOKEN), "CHAT_BOT_TOKEN": b64(BOT_TOKEN)},
            "CHAT_APP_TOKEN must decode to an app-level token starting with 'xapp-'",
        ),
        (
            {"CHAT_APP_TOKEN": b64(APP_TOKEN), "CHAT_BOT_TOKEN": b64("xoxp-user-token")},
            "CHAT_BOT_TOKEN must decode to a bot token starting with 'xoxb-'",
        ),
    ],
)
def test_a_chat_configuration_without_usable_tokens_is_422(
    client, engine, admin, chat_plugin, envvars, fragment
):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    response = client.put(
        "/api/plugins/chat/config", json={"envvars": envvars}, headers=admin.headers
    )

    assert response.status_code == 422
    assert fragment in response.json()["message"]
    # The previous configuration stays in force.
    assert stored_envvars(engine, "chat") == {
        "CHAT_APP_TOKEN": APP_TOKEN.encode(),
        "CHAT_BOT_TOKEN": BOT_TOKEN.encode(),
    }


def test_creating_the_chat_plugin_with_unusable_tokens_creates_nothing(client, admin):
    response = client.post(
        "/api/plugins",
        json={"name": "chat", "config": {"envvars": {"CHAT_APP_TOKEN": b64(APP_TOKEN)}}},
        headers=admin.headers,
    )

    assert response.status_code == 422
    assert client.get("/api/plugins/chat", headers=admin.headers).status_code == 404


def test_config_of_an_unknown_or_absent_plugin_is_404(client, admin):
    unknown = client.put("/api/plugins/nope/config", json=CHAT_CONFIG, headers=admin.headers)
    absent = client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    assert unknown.status_code == 404
    assert unknown.json() == {"message": "there is no plugin called 'nope'"}
    assert absent.status_code == 404
    assert absent.json() == {"message": "the chat plugin has not been created yet"}


def test_plugins_are_for_admins_only(client, engine, admin, dev, chat_plugin):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    attempts = [
        client.put("/api/plugins/chat/config", json={"envvars": {}}, headers=dev.headers),
        client.get("/api/plugins/chat", headers=dev.headers),
        client.get("/api/plugins", headers=dev.headers),
        client.post("/api/plugins", json={"name": "audit"}, headers=dev.headers),
        client.delete("/api/plugins/chat", headers=dev.headers),
    ]
    anonymous = client.put("/api/plugins/chat/config", json=CHAT_CONFIG)

    assert [response.status_code for response in attempts] == [403] * 5
    assert all(response.json()["message"] for response in attempts)
    assert anonymous.status_code == 401
    assert stored_value(engine, "chat", "CHAT_APP_TOKEN") == APP_TOKEN.encode()


def test_every_plugin_name_of_the_spec_can_be_created_once(client, admin):
    names = ["audit", "access_control", "dlp", "indexer", "review", "runbooks", "chat", "webhooks"]
    for name in names:
        assert (
            client.post("/api/plugins", json={"name": name}, headers=admin.headers).status_code
            == 201
        )

    again = client.post("/api/plugins", json={"name": "dlp"}, headers=admin.headers)
    unknown = client.post("/api/plugins", json={"name": "slack"}, headers=admin.headers)

    assert again.status_code == 409
    assert again.json() == {"message": "the dlp plugin already exists"}
    assert unknown.status_code == 400
    listed = client.get("/api/plugins", headers=admin.headers).json()
    assert sorted(plugin["name"] for plugin in listed) == sorted(names)


def test_deleting_a_plugin_drops_its_configuration(client, engine, admin, chat_plugin):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)

    deleted = client.delete("/api/plugins/chat", headers=admin.headers)

    assert deleted.status_code == 204
    assert client.get("/api/plugins/chat", headers=admin.headers).status_code == 404
    assert stored_envvars(engine, "chat") is None
    assert client.delete("/api/plugins/chat", headers=admin.headers).status_code == 404


# -- access control ---------------------------------------------------------------------------


def enable_access_control(client, admin, connections):
    response = client.post(
        "/api/plugins",
        json={"name": "access_control", "connections": connections},
        headers=admin.headers,
    )
    assert response.status_code == 201, response.text


def open_session_on(client, person, connection):
    return client.post(
        "/api/sessions",
        json={"connection": connection, "script": "select 1"},
        headers=person.headers,
    )


def test_access_control_lets_only_the_listed_groups_open_sessions(client, engine, admin, dev):
    make_connection(client, admin, "pg-prod")
    make_connection(client, admin, "pg-dev")
    sre = make_user(engine, "sre", ["sre"])
    enable_access_control(client, admin, [{"name": "pg-dev", "config": ["dev", "sre"]}])

    assert open_session_on(client, dev, "pg-dev").status_code == 201
    assert open_session_on(client, sre, "pg-dev").status_code == 201
    refused = open_session_on(client, dev, "pg-prod")
    assert refused.status_code == 403
    assert refused.json() == {
        "message": "access control allows none of your groups on connection 'pg-prod'; "
        "ask an admin to add one of them to the access_control plugin"
    }
    # Admins always pass.
    assert open_session_on(client, admin, "pg-prod").status_code == 201
    # Only the sessions let through are stored.
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT count(*) FROM gateway_session")).scalar_one()
    assert stored == 3


def test_without_access_control_everyone_may_open_sessions(client, admin, dev):
    make_connection(client, admin, "pg-prod")

    assert open_session_on(client, dev, "pg-prod").status_code == 201


def test_disabling_access_control_opens_connections_again(client, admin, dev):
    make_connection(client, admin, "pg-prod")
    enable_access_control(client, admin, [])
    assert open_session_on(client, dev, "pg-prod").status_code == 403

    client.delete("/api/plugins/access_control", headers=admin.headers)

    assert open_session_on(client, dev, "pg-prod").status_code == 201


def test_what_get_answers_can_be_put_back_as_it_is(client, engine, admin, chat_plugin):
    make_connection(client, admin)
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)
    client.put(
        "/api/plugins/chat",
        json={"connections": [{"name": "pg-prod", "config": ["C0DBA"]}]},
        headers=admin.headers,
    )
    read = client.get("/api/plugins/chat", headers=admin.headers).json()

    again = client.put("/api/plugins/chat", json=read, headers=admin.headers)

    assert again.status_code == 200, again.text
    assert again.json() == read
    # REDACTED sent back kept the stored tokens.
    assert stored_value(engine, "chat", "CHAT_BOT_TOKEN") == BOT_TOKEN.encode()
    assert stored_value(engine, "chat", "CHAT_APP_TOKEN") == APP_TOKEN.encode()


def test_redacted_keeps_one_value_while_another_changes(client, engine, admin, chat_plugin):
    client.put("/api/plugins/chat/config", json=CHAT_CONFIG, headers=admin.headers)
    new_bot = "xoxb-2222222222-3333333333-NewNewNewNewNewNewNewNewNe"

    answer = client.put(
        "/api/plugins/chat/config",
        json={"envvars": {"CHAT_APP_TOKEN": "REDACTED", "CHAT_BOT_TOKEN": b64(new_bot)}},
        headers=admin.headers,
    )

    assert answer.status_code == 200, answer.text
    assert stored_value(engine, "chat", "CHAT_APP_TOKEN") == APP_TOKEN.encode()
    assert stored_value(engine, "chat", "CHAT_BOT_TOKEN") == new_bot.encode()


def test_a_put_naming_another_plugin_is_400_and_changes_nothing(client, admin, chat_plugin):
    answer = client.put(
        "/api/plugins/chat",
        json={"name": "review", "connections": [{"name": "nope", "config": []}]},
        headers=admin.headers,
    )

    assert answer.status_code == 400
    assert answer.json()["message"].startswith("name: the body names plugin 'review'")


def test_redacted_for_a_value_never_stored_is_400(client, engine, admin, chat_plugin):
    answer = client.put(
        "/api/plugins/chat/config",
        json={"envvars": {"CHAT_APP_TOKEN": "REDACTED", "CHAT_BOT_TOKEN": b64(BOT_TOKEN)}},
        headers=admin.headers,
    )
    created = client.post(
        "/api/plugins",
        json={"name": "webhooks", "config": {"envvars": {"KEY": "REDACTED"}}},
        headers=admin.headers,
    )

    assert answer.status_code == 400
    assert answer.json()["message"].startswith(
        "envvars.CHAT_APP_TOKEN: REDACTED keeps the stored value, and CHAT_APP_TOKEN has none"
    )
    assert stored_envvars(engine, "chat") == {}
    assert created.status_code == 400
    assert "a new plugin has none" in created.json()["message"]


def test_a_refused_configuration_in_a_put_changes_no_connection(client, admin, chat_plugin):
    make_connection(client, admin)
    body = {
        "connections": [{"name": "pg-prod", "config": ["C0DBA"]}],
        "config": {"envvars": {"CHAT_BOT_TOKEN": b64("not-a-token")}},
    }

    answer = client.put("/api/plugins/chat", json=body, headers=admin.headers)

    assert answer.status_code == 422
    assert client.get("/api/plugins/chat", headers=admin.headers).json()["connections"] == []
