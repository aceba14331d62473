"""The audit trail: each act recorded once, paged newest first, exported as JSON Lines and
CSV, append-only in the database."""

import csv
import io
import json

import pytest
from sqlalchemy import text

from models.chat.links import start_chat_link
from models.core.clock import utc_now
from models.core.db import db_scope, write_transaction
from tests.factories import (
    configure_review_groups,
    decide,
    make_connection,
    make_user,
    open_session,
)

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"], email="admin@example.com"),
        "dev": make_user(engine, "dev", ["dev"], email="dev@example.com"),
        "dba": make_user(engine, "dba", ["dba"], email="dba@example.com"),
    }


def trail(client, admin, **params) -> list[dict]:
    answer = client.get("/api/audit", params={"limit": 500, **params}, headers=admin.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


def test_each_act_is_recorded_once(client, people):
    admin = people["admin"]
    make_connection(client, admin)
    configure_review_groups(client, admin, "pg-prod", ["dba"])
    review = open_session(client, people["dev"], reason="INC-1")["review"]
    decide(client, people["dba"], review["id"], status="REJECTED", rejection_reason="no")
    rule = {"name": "r", "connections": ["pg-prod"], "approval_groups": ["dba"]}
    client.post("/api/access-request-rules", json=rule, headers=admin.headers)
    client.put(
        "/api/plugins/review/config",
        json={"envvars": {"TEAM": "ZGJh"}},
        headers=admin.headers,
    )
    sidecar = client.post("/api/sidecars", json={"name": "edge-1"}, headers=admin.headers).json()
    client.delete(f"/api/sidecars/{sidecar['id']}", headers=admin.headers)
    refused = client.post(
        "/api/sidecars/handshake", json={"version": "1"}, headers={"gateway-sidecar-token": "ags_x"}
    )
    assert refused.status_code == 401

    kinds = [item["kind"] for item in trail(client, admin)]

    for kind in (
        "review.created",
        "review.decided",
        "rule.created",
        "plugin.config_changed",
        "sidecar.created",
        "sidecar.revoked",
        "sidecar.handshake_refused",
    ):
        assert kinds.count(kind) == 1, kind
    decided = trail(client, admin, kind="review.decided")[0]
    assert decided["actor"] == "dba@example.com"
    assert decided["door"] == "api"
    assert decided["target"] == f"review:{review['id']}"
    assert decided["details"]["decision"] == "REJECTED"
    assert decided["details"]["reason"] == "no"
    assert decided["details"]["groups"] == ["dba"]
    config = trail(client, admin, kind="plugin.config_changed")[0]
    assert config["details"] == {"added": ["TEAM"], "removed": [], "changed": []}
    assert "ZGJh" not in json.dumps(trail(client, admin)), "never a configuration value"
    assert [i["kind"] for i in trail(client, admin, review=review["id"])] == [
        "review.decided",
        "review.created",
    ]


def test_pages_walk_the_trail_newest_first_once(client, people):
    admin = people["admin"]
    for n in range(7):
        client.post(
            "/api/connections", json={"name": f"c{n}", "type": "database"}, headers=admin.headers
        )
        client.post(
            "/api/access-request-rules",
            json={"name": f"r{n}", "connections": [f"c{n}"], "approval_groups": ["dba"]},
            headers=admin.headers,
        )
    seen, cursor = [], None
    while True:
        params = {"limit": 3, "kind": "rule.created"} | ({"cursor": cursor} if cursor else {})
        page = client.get("/api/audit", params=params, headers=admin.headers).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 7
    assert seen == sorted(seen, reverse=True)
    bad = client.get("/api/audit", params={"cursor": "nope"}, headers=admin.headers)
    assert bad.status_code == 400


def test_exports_parse_as_json_lines_and_csv(client, people):
    admin = people["admin"]
    make_connection(client, admin)
    configure_review_groups(client, admin, "pg-prod", ["dba"])
    open_session(client, people["dev"])

    jsonl = client.get("/api/audit/export", params={"format": "jsonl"}, headers=admin.headers)
    as_csv = client.get("/api/audit/export", params={"format": "csv"}, headers=admin.headers)

    assert jsonl.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert {"id", "at", "kind", "actor", "door", "target", "details"} <= set(lines[0])
    assert [line["id"] for line in lines] == sorted(line["id"] for line in lines)
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [int(row["id"]) for row in rows] == [line["id"] for line in lines]
    assert json.loads(rows[-1]["details"]) == lines[-1]["details"]


def test_the_trail_is_for_admins_and_cannot_be_rewritten(client, people, engine):
    assert client.get("/api/audit", headers=people["dev"].headers).status_code == 403
    assert client.get("/api/audit/export", headers=people["dev"].headers).status_code == 403
    make_connection(client, people["admin"])
    client.post(
        "/api/access-request-rules",
        json={"name": "r", "connections": ["pg-prod"], "approval_groups": ["dba"]},
        headers=people["admin"].headers,
    )
    for statement in ("UPDATE audit_event SET actor = 'someone else'", "DELETE FROM audit_event"):
        with (
            db_scope(engine) as db,
            pytest.raises(Exception, match="append-only"),
            write_transaction(db),
        ):
            db.connection().execute(text(statement))


def test_changes_of_users_plugins_links_and_endpoints_are_recorded_once_each(
    client, people, engine
):
    admin = people["admin"]
    client.post("/api/plugins", json={"name": "webhooks"}, headers=admin.headers)
    client.put("/api/plugins/webhooks", json={"connections": []}, headers=admin.headers)
    client.delete("/api/plugins/webhooks", headers=admin.headers)
    client.patch(
        f"/api/users/{people['dev'].id}", json={"groups": ["dev", "dba"]}, headers=admin.headers
    )
    endpoint = client.post(
        "/api/webhooks/endpoints", json={"url": "https://hooks.example/x"}, headers=admin.headers
    ).json()
    client.post(f"/api/webhooks/endpoints/{endpoint['id']}/rotate-secret", headers=admin.headers)
    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0DEV", now=utc_now())
    client.post("/api/users/me/chat-link", json={"code": code}, headers=people["dev"].headers)

    items = trail(client, admin)
    kinds = [item["kind"] for item in items]

    for kind, count in {
        "plugin.created": 1,
        "plugin.updated": 1,
        "plugin.deleted": 1,
        "user.updated": 1,
        "webhook.endpoint_changed": 2,
        "chat.linked": 1,
    }.items():
        assert kinds.count(kind) == count, kind
    user = next(item for item in items if item["kind"] == "user.updated")
    assert user["details"] == {"groups": {"before": ["dev"], "after": ["dev", "dba"]}}
    linked = next(item for item in items if item["kind"] == "chat.linked")
    assert (linked["actor"], linked["door"], linked["details"]["chat_id"]) == (
        "dev@example.com",
        "api",
        "U0DEV",
    )
    assert endpoint["secret"] not in json.dumps(items), "never a secret"
