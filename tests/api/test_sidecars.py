"""Sidecars: registration, configuration, the handshake and its license, and filed reviews."""

import hashlib
import json
import uuid
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from api.app import create_app
from models.core.clock import utc_now
from models.core.db import db_scope
from models.sidecars.license import load_public_key, verify_license
from models.sidecars.schema import Sidecar
from tests.factories import configure_review_groups, decide, make_connection, make_user

LISTENERS = [{"name": "pg", "connection": "pg-prod", "protocol": "postgres", "port": 5432}]


@pytest.fixture
def connection(client, admin):
    return make_connection(client, admin, "pg-prod")


def create_sidecar(client, admin, name="edge-1"):
    response = client.post("/api/sidecars", json={"name": name}, headers=admin.headers)
    assert response.status_code == 201, response.text
    return response.json()


def assign(client, admin, sidecar, listeners=LISTENERS):
    return client.put(
        f"/api/sidecars/{sidecar['id']}/config",
        json={"listeners": listeners},
        headers=admin.headers,
    )


def handshake(client, token, body=None):
    headers = {} if token is None else {"gateway-sidecar-token": token}
    return client.post(
        "/api/sidecars/handshake",
        json={"version": "1.4.2"} if body is None else body,
        headers=headers,
    )


def stored_sidecar(engine, sidecar_id):
    """The sidecar's row as stored, every column."""
    with db_scope(engine) as db:
        return db.get_one(Sidecar, uuid.UUID(sidecar_id)).model_dump()


@pytest.fixture
def ready_sidecar(client, admin, connection):
    sidecar = create_sidecar(client, admin)
    assert assign(client, admin, sidecar).status_code == 200
    return sidecar


# -- registration -----------------------------------------------------------------------------


def test_a_sidecar_token_is_shown_once_and_stored_only_as_a_hash(client, engine, admin):
    sidecar = create_sidecar(client, admin)

    assert set(sidecar) == {"id", "name", "token"}
    assert sidecar["name"] == "edge-1"
    secret = sidecar["token"].removeprefix(f"ags_{uuid.UUID(sidecar['id']).hex}_")
    assert len(secret) >= 43  # 32 random bytes, base64url
    row = stored_sidecar(engine, sidecar["id"])
    assert sidecar["token"] not in json.dumps({k: str(v) for k, v in row.items()})
    assert row["token_hash"] == hashlib.sha256(sidecar["token"].encode()).hexdigest()
    shown = client.get(f"/api/sidecars/{sidecar['id']}", headers=admin.headers)
    listed = client.get("/api/sidecars", headers=admin.headers)
    assert shown.status_code == 200
    assert shown.json() == {
        "id": sidecar["id"],
        "name": "edge-1",
        "version": None,
        "last_seen_at": None,
        "listeners": [],
        "configured_at": None,
        "created_at": shown.json()["created_at"],
        "revoked_at": None,
    }
    assert listed.json() == [shown.json()]
    for response in (shown, listed):
        assert sidecar["token"] not in response.text
        assert row["token_hash"] not in response.text


def test_tokens_differ_between_sidecars(client, admin):
    tokens = {create_sidecar(client, admin, f"edge-{n}")["token"] for n in range(5)}

    assert len(tokens) == 5


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_sidecar_names_are_unique_among_live_sidecars(client, admin):
    first = create_sidecar(client, admin)

    duplicate = client.post("/api/sidecars", json={"name": "edge-1"}, headers=admin.headers)
    assert duplicate.status_code == 409
    assert duplicate.json() == {"message": "a sidecar named 'edge-1' already exists"}

    client.delete(f"/api/sidecars/{first['id']}", headers=admin.headers)
    assert (
        client.post("/api/sidecars", json={"name": "edge-1"}, headers=admin.headers).status_code
        == 201
    )


@pytest.mark.parametrize("name", ["", "-edge", "edge one", "x" * 64, "edge/1", None, 7])
def test_bad_sidecar_names_are_400(client, admin, name):
    response = client.post("/api/sidecars", json={"name": name}, headers=admin.headers)

    assert response.status_code == 400
    assert "body.name" in response.json()["message"]


def test_managing_sidecars_is_for_admins(client, admin, dev):
    sidecar = create_sidecar(client, admin)

    attempts = [
        client.post("/api/sidecars", json={"name": "mine"}, headers=dev.headers),
        client.get("/api/sidecars", headers=dev.headers),
        client.get(f"/api/sidecars/{sidecar['id']}", headers=dev.headers),
        client.put(
            f"/api/sidecars/{sidecar['id']}/config", json={"listeners": []}, headers=dev.headers
        ),
        client.delete(f"/api/sidecars/{sidecar['id']}", headers=dev.headers),
    ]

    assert [response.status_code for response in attempts] == [403] * 5
    assert client.get("/api/sidecars").status_code == 401


def test_unknown_sidecars_are_404(client, admin):
    missing = "00000000-0000-4000-8000-000000000000"

    assert client.get(f"/api/sidecars/{missing}", headers=admin.headers).status_code == 404
    assert client.delete(f"/api/sidecars/{missing}", headers=admin.headers).status_code == 404
    not_an_id = client.get("/api/sidecars/not-a-uuid", headers=admin.headers)
    assert not_an_id.status_code == 404
    assert not_an_id.json() == {"message": "Not Found"}


# -- configuration ----------------------------------------------------------------------------


def test_an_admin_assigns_listeners(client, admin, connection):
    sidecar = create_sidecar(client, admin)

    response = assign(client, admin, sidecar)

    assert response.status_code == 200
    assert response.json()["listeners"] == LISTENERS
    assert response.json()["configured_at"] is not None
    shown = client.get(f"/api/sidecars/{sidecar['id']}", headers=admin.headers).json()
    assert shown["listeners"] == LISTENERS


@pytest.mark.parametrize(
    ("listeners", "fragment"),
    [
        ([{**LISTENERS[0], "port": 0}], "port"),
        ([{**LISTENERS[0], "port": 65536}], "port"),
        ([{**LISTENERS[0], "port": "5432"}], "port"),
        ([{**LISTENERS[0], "port": True}], "port"),
        ([{**LISTENERS[0], "protocol": "gopher"}], "protocol"),
        ([{**LISTENERS[0], "name": ""}], "name"),
        ([{key: v for key, v in LISTENERS[0].items() if key != "connection"}], "connection"),
        ([{**LISTENERS[0], "extra": 1}], "extra"),
        ([LISTENERS[0], {**LISTENERS[0], "port": 5433}], "listener names must be distinct"),
        ([LISTENERS[0], {**LISTENERS[0], "name": "pg2"}], "listener ports must be distinct"),
        ([{**LISTENERS[0], "connection": "nope"}], "listener 'pg': no connection is called 'nope'"),
        ("pg", "listeners"),
    ],
)
def test_bad_configurations_are_400_and_change_nothing(
    client, admin, ready_sidecar, listeners, fragment
):
    response = assign(client, admin, ready_sidecar, listeners)

    assert response.status_code == 400
    assert fragment in response.json()["message"]
    shown = client.get(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers).json()
    assert shown["listeners"] == LISTENERS


def test_a_revoked_sidecar_cannot_be_configured(client, admin, ready_sidecar):
    client.delete(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers)

    response = assign(client, admin, ready_sidecar)

    assert response.status_code == 409
    assert response.json() == {"message": "sidecar 'edge-1' is revoked; create a new one"}


# -- handshake --------------------------------------------------------------------------------


def test_a_handshake_returns_the_configuration_and_a_signed_license(
    client, engine, settings, admin, ready_sidecar
):
    before = utc_now()
    response = handshake(client, ready_sidecar["token"])
    after = utc_now()

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == ready_sidecar["id"]
    assert body["name"] == "edge-1"
    assert body["version"] == "1.4.2"
    assert body["config"] == {"listeners": LISTENERS}
    signer_key = load_public_key(client.app.state.license_signer.public_key_pem().encode())
    payload = verify_license(body["license"], trusted_key=signer_key, now=utc_now())
    assert payload["organization"] == "default"
    assert payload["plan"] == "community"
    assert datetime.fromisoformat(payload["expires_at"]) > after
    # The version and the time are recorded, and visible to admins.
    shown = client.get(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers).json()
    assert shown["version"] == "1.4.2"
    assert before <= datetime.fromisoformat(shown["last_seen_at"]) <= after
    # The license is not stored with the sidecar.
    row = stored_sidecar(engine, ready_sidecar["id"])
    assert body["license"]["signature"] not in json.dumps({k: str(v) for k, v in row.items()})


def test_each_handshake_records_the_latest_version_and_time(client, admin, ready_sidecar):
    with freeze_time("2026-11-22 09:00:00"):
        handshake(client, ready_sidecar["token"], {"version": "1.0.0"})
    with freeze_time("2026-11-22 10:30:00"):
        handshake(client, ready_sidecar["token"], {"version": "1.1.0"})

    shown = client.get(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers).json()
    assert shown["version"] == "1.1.0"
    assert shown["last_seen_at"] == "2026-11-22T10:30:00Z"


@pytest.mark.parametrize(
    "token",
    [None, "", "nonsense", "ags_", "ags_" + "0" * 32 + "_x"],
    ids=["missing", "empty", "garbage", "prefix only", "unknown id"],
)
def test_a_missing_or_unknown_token_is_401_and_records_nothing(
    client, engine, ready_sidecar, token
):
    response = handshake(client, token)

    assert response.status_code == 401
    assert response.json()["message"] in (
        "send the sidecar's token in the gateway-sidecar-token header",
        "the sidecar token is not valid: unknown, revoked or mistyped",
    )
    assert stored_sidecar(engine, ready_sidecar["id"])["last_seen_at"] is None


def test_a_token_with_a_wrong_secret_is_401(client, engine, ready_sidecar):
    token = ready_sidecar["token"]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")

    response = handshake(client, forged)

    assert response.status_code == 401
    assert stored_sidecar(engine, ready_sidecar["id"])["version"] is None


def test_a_token_is_refused_before_the_body_is_looked_at(client, ready_sidecar):
    invalid = handshake(client, "nonsense", {"version": ""})
    not_json = client.post(
        "/api/sidecars/handshake",
        content=b"{not json",
        headers={"gateway-sidecar-token": "nonsense", "Content-Type": "application/json"},
    )

    assert invalid.status_code == 401
    assert not_json.status_code == 401


def test_a_body_that_is_not_json_is_400(client, ready_sidecar):
    response = client.post(
        "/api/sidecars/handshake",
        content=b"{not json",
        headers={
            "gateway-sidecar-token": ready_sidecar["token"],
            "Content-Type": "application/json",
        },
    )

    assert response.status_code == 400
    assert response.json() == {"message": "the request body is not valid JSON"}


def test_a_revoked_token_is_401(client, engine, admin, ready_sidecar):
    assert handshake(client, ready_sidecar["token"]).status_code == 200
    seen = stored_sidecar(engine, ready_sidecar["id"])["last_seen_at"]

    revoked = client.delete(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers)
    again = client.delete(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers)
    response = handshake(client, ready_sidecar["token"], {"version": "9.9.9"})

    assert revoked.status_code == 204
    assert again.status_code == 204
    assert response.status_code == 401
    row = stored_sidecar(engine, ready_sidecar["id"])
    assert row["version"] == "1.4.2"
    assert row["last_seen_at"] == seen
    shown = client.get(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers).json()
    assert shown["revoked_at"] is not None


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"version": ""},
        {"version": "x" * 65},
        {"version": "1.0\n"},
        {"version": "1.0\x07"},
        {"version": 1},
        {"version": None},
        {"version": "1.0", "extra": True},
        [],
    ],
)
def test_a_bad_version_is_400_and_records_nothing(client, engine, ready_sidecar, body):
    response = handshake(client, ready_sidecar["token"], body)

    assert response.status_code == 400
    assert response.json()["message"]
    assert stored_sidecar(engine, ready_sidecar["id"])["last_seen_at"] is None


@pytest.mark.parametrize("version", ["1", "x" * 64, "v2.0.0-rc.1+build 7", "версия 1"])
def test_any_printable_version_up_to_64_characters_is_accepted(client, ready_sidecar, version):
    response = handshake(client, ready_sidecar["token"], {"version": version})

    assert response.status_code == 200
    assert response.json()["version"] == version


@pytest.mark.parametrize("listeners", [None, []], ids=["unconfigured", "no listeners"])
def test_without_listeners_the_handshake_is_412_and_records_nothing(
    client, engine, admin, connection, listeners
):
    sidecar = create_sidecar(client, admin)
    if listeners is not None:
        assert assign(client, admin, sidecar, listeners).status_code == 200

    response = handshake(client, sidecar["token"])

    assert response.status_code == 412
    assert response.json() == {
        "message": f"sidecar 'edge-1' has no listeners assigned; an admin assigns them with "
        f"PUT /api/sidecars/{sidecar['id']}/config, and the next handshake picks them up"
    }
    row = stored_sidecar(engine, sidecar["id"])
    assert row["version"] is None
    assert row["last_seen_at"] is None


def test_a_license_that_cannot_be_read_is_500_and_records_nothing(
    engine, settings, admin, tmp_path
):
    broken_key = tmp_path / "broken.pem"
    broken_key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    broken = settings.model_copy(update={"license_signing_key_file": broken_key})
    with TestClient(create_app(broken)) as client:
        make_connection(client, admin, "pg-prod")
        sidecar = create_sidecar(client, admin)
        assign(client, admin, sidecar)

        response = handshake(client, sidecar["token"])

    assert response.status_code == 500
    assert response.json() == {
        "message": "the organization's license cannot be read; the service logged the details"
    }
    assert stored_sidecar(engine, sidecar["id"])["last_seen_at"] is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_handshakes_work_on_both_databases(client, engine, admin, ready_sidecar):
    assert handshake(client, ready_sidecar["token"]).status_code == 200
    assert stored_sidecar(engine, ready_sidecar["id"])["version"] == "1.4.2"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    version=st.one_of(
        st.text(max_size=80),
        st.integers(),
        st.none(),
        st.booleans(),
        st.lists(st.text(max_size=3), max_size=2),
    )
)
def test_the_handshake_accepts_exactly_printable_versions_of_1_to_64(
    client, engine, ready_sidecar, version
):
    before = stored_sidecar(engine, ready_sidecar["id"])

    response = handshake(client, ready_sidecar["token"], {"version": version})

    valid = (
        isinstance(version, str)
        and 1 <= len(version) <= 64
        and version.isprintable()
        and "\x00" not in version
        and not any(0xD800 <= ord(char) <= 0xDFFF for char in version)
    )
    after = stored_sidecar(engine, ready_sidecar["id"])
    if valid:
        assert response.status_code == 200, response.text
        assert after["version"] == version
    else:
        assert response.status_code == 400, response.text
        assert after["version"] == before["version"]
        assert after["last_seen_at"] == before["last_seen_at"]


# -- reviews filed by sidecars ----------------------------------------------------------------


def file_review(client, sidecar, **fields):
    body = {"listener_name": "pg", "user": "dev", "script": "drop table audit", **fields}
    return client.post(
        "/api/sidecars/reviews", json=body, headers={"gateway-sidecar-token": sidecar["token"]}
    )


@pytest.fixture
def reviewed(client, admin):
    configure_review_groups(client, admin, "pg-prod", ["dba"])


def test_a_sidecar_files_a_review_that_follows_the_same_rules(
    client, engine, admin, dev, ready_sidecar, reviewed
):
    dba = make_user(engine, "dba", ["dba"])

    filed = file_review(client, ready_sidecar)

    assert filed.status_code == 201, filed.text
    review = filed.json()
    assert review["status"] == "PENDING"
    assert review["listener_name"] == "pg"
    assert review["sidecar_id"] == ready_sidecar["id"]
    assert [entry["group"] for entry in review["review_groups_data"]] == ["dba"]
    # The requester cannot approve their own statement; a reviewer can.
    assert decide(client, dev, review["id"], status="APPROVED").status_code == 403
    approved = decide(client, dba, review["id"], status="APPROVED")
    assert approved.status_code == 200
    assert approved.json()["sidecar_id"] == ready_sidecar["id"]
    polled = client.get(
        f"/api/sidecars/reviews/{review['id']}",
        headers={"gateway-sidecar-token": ready_sidecar["token"]},
    )
    assert polled.status_code == 200
    assert polled.json()["status"] == "APPROVED"
    assert polled.json()["listener_name"] == "pg"


def test_reviews_from_connections_carry_no_sidecar_fields(client, admin, dev, connection, reviewed):
    response = client.post(
        "/api/sessions", json={"connection": "pg-prod", "script": "select 1"}, headers=dev.headers
    )

    review = response.json()["review"]
    assert "listener_name" not in review
    assert "sidecar_id" not in review


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"listener_name": "mysql"}, 400, "sidecar 'edge-1' has no listener called 'mysql'"),
        ({"user": "ghost"}, 404, "no user 'ghost' has signed in to this service"),
        ({"script": ""}, 400, "body.script"),
        ({"type": "forever"}, 400, "body.type"),
    ],
)
def test_bad_sidecar_reviews_are_refused(
    client, engine, dev, ready_sidecar, reviewed, fields, status, message
):
    response = file_review(client, ready_sidecar, **fields)

    assert response.status_code == status
    assert message in response.json()["message"]
    with engine.connect() as db:
        assert db.execute(text("SELECT count(*) FROM review")).scalar_one() == 0


def test_a_sidecar_review_on_a_connection_without_reviewers_is_412(
    client, engine, dev, ready_sidecar
):
    response = file_review(client, ready_sidecar)

    assert response.status_code == 412
    assert response.json() == {
        "message": "connection 'pg-prod' has no reviewers configured, "
        "so its statements run without review"
    }
    with engine.connect() as db:
        assert db.execute(text("SELECT count(*) FROM gateway_session")).scalar_one() == 0


def test_sidecar_reviews_need_a_live_token_and_stay_with_their_sidecar(
    client, admin, dev, ready_sidecar, reviewed
):
    review = file_review(client, ready_sidecar).json()
    other = create_sidecar(client, admin, "edge-2")

    anonymous = client.post("/api/sidecars/reviews", json={"listener_name": "pg"})
    foreign = client.get(
        f"/api/sidecars/reviews/{review['id']}", headers={"gateway-sidecar-token": other["token"]}
    )
    client.delete(f"/api/sidecars/{ready_sidecar['id']}", headers=admin.headers)
    revoked = file_review(client, ready_sidecar)

    assert anonymous.status_code == 401
    assert foreign.status_code == 404
    assert revoked.status_code == 401


def test_access_control_applies_to_statements_through_sidecars(
    client, engine, admin, dev, ready_sidecar, reviewed
):
    client.post(
        "/api/plugins",
        json={"name": "access_control", "connections": [{"name": "pg-prod", "config": ["sre"]}]},
        headers=admin.headers,
    )

    response = file_review(client, ready_sidecar)

    assert response.status_code == 403
    assert "access control allows none of your groups" in response.json()["message"]
    with engine.connect() as db:
        assert db.execute(text("SELECT count(*) FROM review")).scalar_one() == 0


def test_a_sidecar_review_carries_the_reason_and_the_rule_may_require_one(
    client, admin, dev, ready_sidecar
):
    rule = {
        "name": "prod-needs-a-reason",
        "connections": ["pg-prod"],
        "approval_groups": ["dba"],
        "require_reason": True,
    }
    assert (
        client.post("/api/access-request-rules", json=rule, headers=admin.headers).status_code
        == 201
    )

    refused = file_review(client, ready_sidecar)
    filed = file_review(client, ready_sidecar, reason="INC-7 cleanup")

    assert refused.status_code == 400
    assert "requires a reason" in refused.json()["message"]
    assert filed.status_code == 201
    assert filed.json()["reason"] == "INC-7 cleanup"
