"""Connections, the review plugin's groups and access request rules: what admins configure."""

import json

import pytest

from tests.factories import make_connection, make_user, open_session


def test_connections_are_created_by_admins_and_listed_for_all(client, admin, dev):
    created = make_connection(client, admin, "pg-prod")

    assert created["name"] == "pg-prod"
    assert created["type"] == "database"
    listed = client.get("/api/connections", headers=dev.headers).json()
    assert [item["id"] for item in listed] == [created["id"]]
    refused = client.post("/api/connections", json={"name": "x", "type": "db"}, headers=dev.headers)
    assert refused.status_code == 403


def test_connection_names_are_unique(client, admin):
    make_connection(client, admin, "pg-prod")

    response = client.post(
        "/api/connections", json={"name": "pg-prod", "type": "database"}, headers=admin.headers
    )

    assert response.status_code == 409
    assert response.json() == {"message": "a connection named 'pg-prod' already exists"}


@pytest.mark.parametrize("name", ["", "has space", "-leading-dash", "x" * 129, "semi;colon"])
def test_connection_names_are_validated(client, admin, name):
    response = client.post(
        "/api/connections", json={"name": name, "type": "database"}, headers=admin.headers
    )

    assert response.status_code == 400
    assert "body.name" in response.json()["message"]


def test_the_review_plugin_maps_connections_to_reviewer_groups(client, admin, dev):
    connection = make_connection(client, admin, "pg-prod")

    created = client.post(
        "/api/plugins",
        json={"name": "review", "connections": [{"id": connection["id"], "config": ["dba"]}]},
        headers=admin.headers,
    )

    assert created.status_code == 201
    body = created.json()
    assert body["name"] == "review"
    assert body["connections"] == [{"id": connection["id"], "name": "pg-prod", "config": ["dba"]}]
    assert body["priority"] == 0
    assert body["source"] is None
    assert set(body["config"]) == {"id", "envvars"}
    review = open_session(client, dev, "pg-prod")["review"]
    assert [entry["group"] for entry in review["review_groups_data"]] == ["dba"]

    replaced = client.put(
        "/api/plugins/review",
        json={"connections": [{"name": "pg-prod", "config": ["sre", "sec"]}]},
        headers=admin.headers,
    )
    assert replaced.status_code == 200
    assert replaced.json()["connections"][0]["config"] == ["sre", "sec"]
    review = open_session(client, dev, "pg-prod")["review"]
    assert [entry["group"] for entry in review["review_groups_data"]] == ["sec", "sre"]


def test_without_review_configured_a_session_has_no_review(client, admin, dev):
    make_connection(client, admin, "pg-dev")

    session = open_session(client, dev, "pg-dev")

    assert session["review"] is None
    assert session["status"] == "ready"
    executed = client.post(f"/api/sessions/{session['id']}/exec", headers=dev.headers)
    assert executed.status_code == 200
    assert executed.json()["status"] == "running"


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"name": "review"}, 409, "the review plugin already exists"),
        ({"name": "kazoo"}, 400, "body.name"),
        (
            {"name": "audit", "connections": [{"name": "nope", "config": []}]},
            400,
            "no connection matches nope",
        ),
        (
            {"name": "audit", "connections": [{"config": []}]},
            400,
            "each connection needs its id or its name",
        ),
        (
            {"name": "audit", "connections": [{"name": "pg-prod"}, {"name": "pg-prod"}]},
            400,
            "connection 'pg-prod' is listed more than once",
        ),
    ],
)
def test_plugin_errors(client, admin, body, status, fragment):
    make_connection(client, admin, "pg-prod")
    client.post("/api/plugins", json={"name": "review"}, headers=admin.headers)

    response = client.post("/api/plugins", json=body, headers=admin.headers)

    assert response.status_code == status
    assert fragment in response.json()["message"]


def test_plugin_lookup_errors(client, admin, dev):
    assert client.get("/api/plugins/kazoo", headers=admin.headers).json() == {
        "message": "there is no plugin called 'kazoo'"
    }
    assert client.get("/api/plugins/chat", headers=admin.headers).json() == {
        "message": "the chat plugin has not been created yet"
    }
    assert client.get("/api/plugins", headers=dev.headers).status_code == 403


RULE = {
    "name": "prod",
    "connections": ["pg-prod"],
    "approval_groups": ["dba"],
    "force_approval_groups": ["oncall"],
    "min_approvals": 1,
    "access_max_duration": 600_000_000_000,
}


def test_access_request_rules_crud(client, admin):
    make_connection(client, admin, "pg-prod")
    make_connection(client, admin, "pg-stage")

    created = client.post("/api/access-request-rules", json=RULE, headers=admin.headers)
    assert created.status_code == 201
    rule = created.json()
    assert {key: rule[key] for key in RULE} == RULE

    replaced = client.put(
        f"/api/access-request-rules/{rule['id']}",
        json={**RULE, "connections": ["pg-stage"]},
        headers=admin.headers,
    )
    assert replaced.status_code == 200
    assert replaced.json()["connections"] == ["pg-stage"]
    assert client.get(f"/api/access-request-rules/{rule['id']}", headers=admin.headers).json()[
        "connections"
    ] == ["pg-stage"]
    assert len(client.get("/api/access-request-rules", headers=admin.headers).json()) == 1

    deleted = client.delete(f"/api/access-request-rules/{rule['id']}", headers=admin.headers)
    assert deleted.status_code == 204
    assert (
        client.get(f"/api/access-request-rules/{rule['id']}", headers=admin.headers).status_code
        == 404
    )


@pytest.mark.parametrize(
    ("change", "status", "fragment"),
    [
        ({"connections": ["nope"]}, 400, "no connection is called nope"),
        ({"approval_groups": []}, 400, "body.approval_groups"),
        ({"min_approvals": 0}, 400, "body.min_approvals"),
        ({"access_max_duration": -1}, 400, "body.access_max_duration"),
        ({"connections": ["pg-prod", "pg-prod"]}, 400, "connections are listed more than once"),
        ({"name": "other"}, 409, "connection pg-prod is already governed by the rule 'prod'"),
        ({"connections": ["pg-stage"]}, 409, "an access request rule named 'prod' already exists"),
    ],
)
def test_rule_errors(client, admin, change, status, fragment):
    make_connection(client, admin, "pg-prod")
    make_connection(client, admin, "pg-stage")
    assert (
        client.post("/api/access-request-rules", json=RULE, headers=admin.headers).status_code
        == 201
    )

    response = client.post(
        "/api/access-request-rules", json={**RULE, **change}, headers=admin.headers
    )

    assert response.status_code == status
    assert fragment in response.json()["message"]


def test_rules_are_admin_only(client, dev):
    assert client.get("/api/access-request-rules", headers=dev.headers).status_code == 403


def test_sessions_validate_their_input(client, admin, dev):
    make_connection(client, admin, "pg-prod")

    unknown = client.post("/api/sessions", json={"connection": "nope"}, headers=dev.headers)
    assert unknown.status_code == 404
    assert unknown.json() == {"message": "no connection is called 'nope'"}
    for body, fragment in [
        ({"connection": "pg-prod", "type": "forever"}, "body.type"),
        ({"connection": "pg-prod", "access_duration": 0}, "body.access_duration"),
        ({"script": "select 1"}, "body.connection"),
    ]:
        response = client.post("/api/sessions", json=body, headers=dev.headers)
        assert response.status_code == 400
        assert fragment in response.json()["message"]


def test_sessions_are_private_to_their_owner_and_admins(client, engine, admin, dev):
    make_connection(client, admin, "pg-prod")
    session = open_session(client, dev, "pg-prod")
    other = make_user(engine, "other", ["dev"])

    assert client.get(f"/api/sessions/{session['id']}", headers=dev.headers).status_code == 200
    assert client.get(f"/api/sessions/{session['id']}", headers=admin.headers).status_code == 200
    hidden = client.get(f"/api/sessions/{session['id']}", headers=other.headers)
    assert hidden.status_code == 404
    assert (
        client.post(f"/api/sessions/{session['id']}/exec", headers=other.headers).status_code == 404
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("/api/connections", {"name": "pg", "type": "data\x00base"}, "NUL"),
        ("/api/sessions", {"connection": "pg-prod", "script": "select '\x00'"}, "NUL"),
        ("/api/sessions", {"connection": "pg-\ud800"}, "unpaired surrogates"),
        (
            "/api/connections",
            {"name": "pg", "type": "db", "subtype": "\udfff"},
            "unpaired surrogates",
        ),
        (
            "/api/sessions",
            {"connection": "pg-prod", "access_duration": 10**30},
            "body.access_duration",
        ),
        (
            "/api/sessions",
            {"connection": "pg-prod", "type": "jit", "access_duration": 2**63},
            "body.access_duration",
        ),
    ],
)
def test_values_no_backend_can_store_are_400_not_500(client, admin, path, body, fragment):
    make_connection(client, admin, "pg-prod")

    # json.dumps escapes as a client's JSON library would: "\\u0000", "\\ud800".
    response = client.post(
        path,
        content=json.dumps(body),
        headers={**admin.headers, "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert fragment in response.json()["message"]


def test_reviewer_groups_in_the_review_plugin_are_group_names(client, admin):
    make_connection(client, admin, "pg-prod")
    client.post("/api/plugins", json={"name": "review"}, headers=admin.headers)

    response = client.put(
        "/api/plugins/review",
        json={"connections": [{"name": "pg-prod", "config": ["dba", "x" * 150]}]},
        headers=admin.headers,
    )

    assert response.status_code == 400
    assert response.json()["message"].startswith("connection 'pg-prod': group names are 1 to 100")
    assert client.get("/api/plugins/review", headers=admin.headers).json()["connections"] == []


def test_a_deeply_nested_body_is_400(client, admin):
    body = '{"connection": "pg-prod", "script": ' + "[" * 500 + "]" * 500 + "}"

    response = client.post(
        "/api/sessions",
        content=body,
        headers={**admin.headers, "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert "body.script" in response.json()["message"]


def test_the_openapi_description_documents_400_not_422(client):
    schema = client.get("/api/openapi.json").json()

    put_review = schema["paths"]["/api/reviews/{review_id}"]["put"]["responses"]
    assert "422" not in put_review
    assert put_review["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }
    assert schema["info"]["version"] == "1.173.0"


def test_the_openapi_description_documents_the_plugin_and_handshake_statuses(client):
    paths = client.get("/api/openapi.json").json()["paths"]

    plugin_config = paths["/api/plugins/{name}/config"]["put"]["responses"]
    handshake = paths["/api/sidecars/handshake"]["post"]

    assert {"200", "400", "403", "404", "422"} <= set(plugin_config)
    assert "ErrorBody" in str(plugin_config["422"])
    assert {"200", "400", "401", "412", "500"} <= set(handshake["responses"])
    assert handshake["security"] == [{"APIKeyHeader": []}]
