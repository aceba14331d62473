"""What an attacker on the network would try against the API, refused as a user sees it."""

import uuid

import pytest
from freezegun import freeze_time
from sqlmodel import select

from models.core.db import db_scope
from models.core.throttle import ThrottleCounter
from models.reviews.schema import Review
from tests.factories import (
    configure_review_groups,
    decide,
    make_connection,
    make_user,
    open_session,
)

WINDOW_8_TO_9 = {
    "type": "time_range",
    "configuration": {"start_time": "08:00", "end_time": "09:00"},
}
ALL_DAY = {"type": "time_range", "configuration": {"start_time": "00:00", "end_time": "23:59"}}


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"]),
        "owner": make_user(engine, "olivia", ["dev"]),
        "dba": make_user(engine, "dana", ["dba"], name="Dana DBA"),
        "sre": make_user(engine, "sam", ["sre"], name="Sam SRE"),
    }


@pytest.fixture
def review(client, people):
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba", "sre"])
    return open_session(client, people["owner"])["review"]


# -- time windows -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_second_approver_cannot_widen_the_window_the_first_set(client, people, review):
    first = decide(
        client, people["dba"], review["id"], status="APPROVED", time_window=WINDOW_8_TO_9
    )
    assert first.status_code == 200

    wider = decide(client, people["sre"], review["id"], status="APPROVED", time_window=ALL_DAY)

    assert wider.status_code == 409
    assert wider.json() == {
        "message": "this review's time window (08:00-09:00 UTC) was set by Dana DBA; an "
        "approval may repeat it but not change it"
    }
    stored = client.get(f"/api/reviews/{review['id']}", headers=people["admin"].headers).json()
    assert stored["time_window"] == WINDOW_8_TO_9
    assert stored["status"] == "PENDING"  # the refused approval did not count either


def test_the_same_window_is_accepted_from_the_next_approver(client, people, review):
    decide(client, people["dba"], review["id"], status="APPROVED", time_window=WINDOW_8_TO_9)

    same = decide(client, people["sre"], review["id"], status="APPROVED", time_window=WINDOW_8_TO_9)

    assert same.status_code == 200
    assert same.json()["status"] == "APPROVED"
    assert same.json()["time_window"] == WINDOW_8_TO_9


def test_an_approved_review_never_gets_a_window_afterwards(client, people, engine, review):
    decide(client, people["dba"], review["id"], status="APPROVED")
    approved = decide(client, people["sre"], review["id"], status="APPROVED")
    assert approved.json()["status"] == "APPROVED"

    late = decide(client, people["dba"], review["id"], status="APPROVED", time_window=ALL_DAY)

    assert late.status_code == 409
    assert "already APPROVED without a time window" in late.json()["message"]
    with db_scope(engine) as db:
        stored = db.exec(select(Review).where(Review.id == uuid.UUID(review["id"]))).one()
    assert stored.time_window is None


# -- strict input -----------------------------------------------------------------------------


@pytest.mark.parametrize("duration", ["60", True, 1.5, "1e9"])
def test_integers_must_be_json_integers(client, people, duration):
    make_connection(client, people["admin"])

    response = client.post(
        "/api/sessions",
        json={"connection": "pg-prod", "type": "jit", "access_duration": duration},
        headers=people["owner"].headers,
    )

    assert response.status_code == 400
    assert "body.access_duration" in response.json()["message"]


def test_force_review_must_be_a_json_boolean(client, people, review):
    response = decide(client, people["admin"], review["id"], status="APPROVED", force_review="yes")

    assert response.status_code == 400
    assert "body.force_review" in response.json()["message"]


def test_the_script_limit_counts_bytes_not_characters(client, people):
    make_connection(client, people["admin"])
    emoji = "\N{GRINNING FACE}" * 250_001  # 250,001 characters, 1,000,004 bytes

    response = client.post(
        "/api/sessions",
        json={"connection": "pg-prod", "script": emoji},
        headers=people["owner"].headers,
    )

    assert response.status_code == 400
    assert response.json()["message"] == (
        "invalid request: body.script: at most 1,000,000 bytes of UTF-8"
    )
    fits = client.post(
        "/api/sessions",
        json={"connection": "pg-prod", "script": "\N{GRINNING FACE}" * 250_000},
        headers=people["owner"].headers,
    )
    assert fits.status_code == 201


@pytest.mark.parametrize("group", ["ops\u0007", "ops\u202eadmin", "new\nline", "\u200bops"])
def test_group_names_with_control_or_format_characters_are_refused(client, people, group):
    response = client.patch(
        f"/api/users/{people['owner'].id}",
        json={"groups": [group]},
        headers=people["admin"].headers,
    )

    assert response.status_code == 400
    assert "without spaces or control characters" in response.json()["message"]


def test_a_wrong_method_is_405_with_allow(client, people):
    response = client.delete("/api/sessions", headers=people["owner"].headers)

    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json() == {"message": "Method Not Allowed"}
    # Beside a route with a parameter: not mistaken for a sidecar id, every method named.
    handshake = client.get("/api/sidecars/handshake", headers=people["owner"].headers)
    assert handshake.status_code == 405
    assert handshake.headers["allow"] == "POST"
    plugins = client.request("OPTIONS", "/api/plugins", headers=people["owner"].headers)
    assert plugins.headers["allow"] == "GET, POST"


# -- credentials before bodies ----------------------------------------------------------------


def test_invalid_json_without_a_token_is_401(client):
    response = client.post(
        "/api/sessions", content=b"{not json", headers={"content-type": "application/json"}
    )

    assert response.status_code == 401
    assert response.json() == {"message": "send an Authorization: Bearer <token> header"}


def test_invalid_json_with_a_wrong_token_is_401(client):
    response = client.post(
        "/api/sessions",
        content=b"{not json",
        headers={"content-type": "application/json", "authorization": "Bearer nope"},
    )

    assert response.status_code == 401


def test_invalid_json_with_a_valid_token_is_still_400(client, people):
    response = client.post(
        "/api/sessions",
        content=b"{not json",
        headers={"content-type": "application/json", **people["owner"].headers},
    )

    assert response.status_code == 400
    assert response.json() == {"message": "the request body is not valid JSON"}


def test_a_sidecar_route_checks_the_token_before_the_body(client):
    response = client.post(
        "/api/sidecars/reviews",
        content=b"{not json",
        headers={"content-type": "application/json", "gateway-sidecar-token": "ags_wrong"},
    )

    assert response.status_code == 401


# -- throttles --------------------------------------------------------------------------------


def test_repeated_wrong_link_codes_are_throttled_with_retry_after(client, people, engine):
    statuses = []
    with freeze_time("2026-11-23 12:00:00"):
        for _ in range(6):
            response = client.post(
                "/api/users/me/chat-link",
                json={"code": "WRONGCODE2"},
                headers=people["dba"].headers,
            )
            statuses.append(response.status_code)
        blocked = response

    assert statuses == [400, 400, 400, 400, 400, 429]
    assert blocked.json() == {"message": "too many wrong link codes; try again in 600 s"}
    assert blocked.headers["retry-after"] == "600"
    with db_scope(engine) as db:
        counters = {row.key: row.count for row in db.exec(select(ThrottleCounter))}
    assert any(f"principal:{people['dba'].id}" in key for key in counters)


def test_link_codes_are_refused_while_throttled_even_the_right_one(client, people, engine):
    """A guess that would be right is refused too, or throttling would not stop guessing."""
    from models.chat.links import start_chat_link

    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0DBA", now=_frozen_now())
    with freeze_time("2026-11-23 12:00:00"):
        for _ in range(5):
            client.post(
                "/api/users/me/chat-link",
                json={"code": "WRONGCODE2"},
                headers=people["dba"].headers,
            )
        right = client.post(
            "/api/users/me/chat-link", json={"code": code}, headers=people["dba"].headers
        )
    with freeze_time("2026-11-23 12:10:01"):
        later = client.post(
            "/api/users/me/chat-link", json={"code": code}, headers=people["dba"].headers
        )

    assert right.status_code == 429
    assert later.status_code == 400  # the window ended; the code had expired meanwhile


def test_repeated_refused_tokens_from_one_address_get_429(client):
    statuses = [
        client.get("/api/users/me", headers={"authorization": f"Bearer wrong-{n}"}).status_code
        for n in range(31)
    ]

    assert statuses == [401] * 30 + [429]
    refused = client.get("/api/users/me", headers={"authorization": "Bearer wrong"})
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 0


def _frozen_now():
    from datetime import UTC, datetime

    return datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


# -- optional approval policies of a rule -----------------------------------------------------


def rule_with(client, admin, **policies):
    make_connection(client, admin)
    response = client.post(
        "/api/access-request-rules",
        json={
            "name": "prod",
            "connections": ["pg-prod"],
            "approval_groups": ["dba", "sre"],
            "force_approval_groups": ["admin"],
            **policies,
        },
        headers=admin.headers,
    )
    assert response.status_code == 201, response.text
    return response.json()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_with_distinct_approvers_one_person_satisfies_one_group(client, people, engine):
    both = make_user(engine, "bo", ["dba", "sre"], name="Bo Both")
    rule = rule_with(client, people["admin"], distinct_approvers=True)
    assert rule["distinct_approvers"] is True
    review = open_session(client, people["owner"])["review"]

    first = decide(client, both, review["id"], status="APPROVED")
    again = decide(client, both, review["id"], status="APPROVED")
    second = decide(client, people["sre"], review["id"], status="APPROVED")

    assert first.status_code == 200
    assert first.json()["status"] == "PENDING"
    assert [(g["group"], g["status"]) for g in first.json()["review_groups_data"]] == [
        ("dba", "APPROVED"),
        ("sre", "PENDING"),
    ]
    assert again.json()["status"] == "PENDING"  # no second group for the same person
    assert second.json()["status"] == "APPROVED"


def test_without_the_policy_one_person_in_two_groups_approves_both(client, people, engine):
    both = make_user(engine, "bo", ["dba", "sre"])
    rule_with(client, people["admin"])
    review = open_session(client, people["owner"])["review"]

    assert decide(client, both, review["id"], status="APPROVED").json()["status"] == "APPROVED"


def test_a_rule_can_forbid_force_approving_ones_own_session(client, people):
    rule_with(client, people["admin"], no_self_force_approval=True)
    own = open_session(client, people["admin"])["review"]
    others = open_session(client, people["owner"])["review"]

    refused = decide(client, people["admin"], own["id"], status="APPROVED", force_review=True)
    allowed = decide(client, people["admin"], others["id"], status="APPROVED", force_review=True)

    assert refused.status_code == 403
    assert refused.json() == {
        "message": "this review's rule forbids force-approving your own session, admins included"
    }
    assert allowed.status_code == 200
    assert allowed.json()["status"] == "APPROVED"
