"""PUT/GET /api/reviews: every rule of spec section 3 as a user of the API sees it."""

from datetime import UTC, datetime

import pytest
from freezegun import freeze_time
from sqlmodel import col, select

from models.core.db import db_scope
from models.delivery.outbox import OutboxEvent
from models.reviews.schema import ReviewDecisionRecord
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
        "admin": make_user(engine, "admin", ["admin"]),
        "owner": make_user(engine, "olivia", ["dev"]),
        "dba": make_user(engine, "dana", ["dba"], name="Dana DBA", email="dana@example.com"),
        "sre": make_user(engine, "sam", ["sre"]),
        "both": make_user(engine, "bo", ["dba", "sre"]),
        "outsider": make_user(engine, "otto", ["web"]),
    }


@pytest.fixture
def review(client, people):
    """A pending review of a session opened by the owner, reviewed by dba and sre."""
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba", "sre"])
    return open_session(client, people["owner"])["review"]


def test_a_new_review_has_a_pending_entry_per_group(review):
    assert review["status"] == "PENDING"
    assert [entry["group"] for entry in review["review_groups_data"]] == ["dba", "sre"]
    for entry in review["review_groups_data"]:
        assert entry["status"] == "PENDING"
        assert entry["reviewed_by"] is None
        assert entry["review_date"] is None
        assert entry["forced_review"] is False
    assert review["access_request_rule_name"] is None
    assert review["access_duration"] == 1_800_000_000_000
    assert "listener_name" not in review
    assert "sidecar_id" not in review


def test_approval_records_the_reviewer_on_their_entry(client, people, review):
    with freeze_time("2026-11-22 10:15:30.250000"):
        response = decide(client, people["dba"], review["id"], status="APPROVED")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "PENDING"
    dba, sre = body["review_groups_data"]
    assert dba["status"] == "APPROVED"
    assert dba["reviewed_by"] == {
        "id": str(people["dba"].id),
        "name": "Dana DBA",
        "email": "dana@example.com",
        "chat_id": "",
    }
    assert dba["review_date"] == "2026-11-22T10:15:30.250000Z"
    assert sre["status"] == "PENDING"


def test_all_groups_approving_approves_the_review(client, people, review):
    decide(client, people["dba"], review["id"], status="APPROVED")
    response = decide(client, people["sre"], review["id"], status="APPROVED")

    assert response.json()["status"] == "APPROVED"
    assert (
        client.get(f"/api/sessions/{review['session']}", headers=people["owner"].headers).json()[
            "status"
        ]
        == "ready"
    )


def test_a_member_of_several_groups_approves_each_of_their_entries(client, people, review):
    body = decide(client, people["both"], review["id"], status="APPROVED").json()

    assert body["status"] == "APPROVED"
    assert {entry["reviewed_by"]["id"] for entry in body["review_groups_data"]} == {
        str(people["both"].id)
    }


def test_the_session_id_names_the_review_too(client, people, review):
    response = decide(client, people["dba"], review["session"], status="APPROVED")

    assert response.status_code == 200
    assert response.json()["id"] == review["id"]
    assert (
        client.get(f"/api/reviews/{review['session']}", headers=people["dba"].headers).json()["id"]
        == review["id"]
    )


def test_approving_twice_is_a_harmless_no_op(client, engine, people, review):
    first = decide(client, people["dba"], review["id"], status="APPROVED").json()
    second = decide(client, people["dba"], review["id"], status="APPROVED")

    assert second.status_code == 200
    assert second.json() == first
    with db_scope(engine) as db:
        decisions = db.exec(select(ReviewDecisionRecord)).all()
    assert len(decisions) == 1


@pytest.mark.parametrize("ref", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_unknown_review_is_404(client, people, review, ref):
    response = decide(client, people["dba"], ref, status="APPROVED")

    assert response.status_code == 404
    assert response.json() == {"message": "review not found"}


def test_owner_cannot_approve_their_own_session(client, engine, people, review):
    owner_in_group = make_user(engine, "olivia", ["dev", "dba"])

    response = decide(client, owner_in_group, review["id"], status="APPROVED")

    assert response.status_code == 403
    assert "your own session" in response.json()["message"]


def test_caller_outside_the_reviewer_groups_is_refused(client, people, review):
    response = decide(client, people["outsider"], review["id"], status="APPROVED")

    assert response.status_code == 403
    assert response.json()["message"] == (
        "you are not in any reviewer group of this review: dba, sre"
    )
    after = client.get(f"/api/reviews/{review['id']}", headers=people["admin"].headers).json()
    assert after["review_groups_data"] == review["review_groups_data"]


def test_rejection_rejects_at_once_and_keeps_the_reason(client, people, review):
    decide(client, people["dba"], review["id"], status="APPROVED")

    response = decide(
        client, people["sre"], review["id"], status="REJECTED", rejection_reason="not in prod"
    )

    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "REJECTED"
    assert body["rejection_reason"] == "not in prod"
    assert [entry["status"] for entry in body["review_groups_data"]] == ["APPROVED", "REJECTED"]


@pytest.mark.parametrize("final", ["REJECTED", "REVOKED"])
def test_a_finished_review_accepts_no_further_decision(client, people, review, final):
    decide(client, people["both"], review["id"], status="APPROVED")
    assert decide(client, people["admin"], review["id"], status=final).status_code == 200

    for person, status in [("dba", "APPROVED"), ("admin", "REJECTED"), ("owner", "REVOKED")]:
        response = decide(client, people[person], review["id"], status=status)
        assert response.status_code == 400
        assert response.json()["message"] == (
            f"this review is {final} and accepts no further decisions"
        )


def test_revoke_needs_an_approved_review(client, people, review):
    response = decide(client, people["admin"], review["id"], status="REVOKED")

    assert response.status_code == 400
    assert response.json()["message"] == "a PENDING review cannot be REVOKED"


def test_only_owner_or_admin_may_end_an_approved_review(client, people, review):
    decide(client, people["both"], review["id"], status="APPROVED")

    refused = decide(client, people["dba"], review["id"], status="REVOKED")
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        "only the owner of the review or an admin can end an approved review"
    )

    with freeze_time("2026-11-22 12:00:00"):
        revoked = decide(client, people["owner"], review["id"], status="REVOKED")
    assert revoked.status_code == 200
    assert revoked.json()["status"] == "REVOKED"
    assert revoked.json()["revoke_at"] == "2026-11-22T12:00:00Z"


def test_the_review_records_who_ended_it(client, engine, people, review):
    decide(client, people["both"], review["id"], status="APPROVED")
    decide(client, people["admin"], review["id"], status="REJECTED", rejection_reason="oops")

    with db_scope(engine) as db:
        decisions = db.exec(
            select(ReviewDecisionRecord).order_by(col(ReviewDecisionRecord.created_at))
        ).all()
    assert [(d.actor_id, d.decision, d.status_after, d.door) for d in decisions] == [
        (people["both"].id, "APPROVED", "APPROVED", "api"),
        (people["admin"].id, "REJECTED", "REJECTED", "api"),
    ]


def test_every_change_writes_an_outbox_event(client, engine, people, review):
    decide(client, people["dba"], review["id"], status="APPROVED")
    decide(client, people["dba"], review["id"], status="APPROVED")  # no-op: no event
    decide(client, people["sre"], review["id"], status="APPROVED")

    with db_scope(engine) as db:
        events = db.exec(select(OutboxEvent).order_by(col(OutboxEvent.id))).all()
    assert [(e.kind, e.payload["status"]) for e in events] == [
        ("review.created", "PENDING"),
        ("review.updated", "PENDING"),
        ("review.updated", "APPROVED"),
    ]
    assert all(e.delivered_at is None for e in events)


# -- body validation: 400 with a message, never FastAPI's 422 ---------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"status": "MAYBE"}, "body.status"),
        ({}, "body.status: Field required"),
        (
            {"status": "APPROVED", "time_window": {"type": "weekly", "configuration": {}}},
            "body.time_window.type",
        ),
        (
            {
                "status": "APPROVED",
                "time_window": {"type": "time_range", "configuration": {"start_time": "09:00"}},
            },
            "time_range needs end_time",
        ),
        (
            {
                "status": "APPROVED",
                "time_window": {
                    "type": "time_range",
                    "configuration": {"start_time": "9am", "end_time": "17:00"},
                },
            },
            "'9am' is not a 24-hour HH:MM time",
        ),
        (
            {
                "status": "REJECTED",
                "time_window": {
                    "type": "time_range",
                    "configuration": {"start_time": "09:00", "end_time": "17:00"},
                },
            },
            "time_window is only accepted with status APPROVED",
        ),
        ({"status": "REJECTED", "rejection_reason": "x" * 1001}, "body.rejection_reason"),
        ({"status": "APPROVED", "force_review": "perhaps"}, "body.force_review"),
        ({"status": "APPROVED", "surprise": 1}, "body.surprise"),
    ],
)
def test_malformed_bodies_are_400_with_a_message(client, people, review, body, fragment):
    response = decide(client, people["dba"], review["id"], **body)

    assert response.status_code == 400
    assert fragment in response.json()["message"]
    after = client.get(f"/api/reviews/{review['id']}", headers=people["dba"].headers).json()
    assert after["status"] == "PENDING"


def test_a_body_that_is_not_json_is_400(client, people, review):
    response = client.put(
        f"/api/reviews/{review['id']}",
        content=b"{not json",
        headers={**people["dba"].headers, "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json() == {"message": "the request body is not valid JSON"}


# -- force approval, time windows, jit --------------------------------------------------------


@pytest.fixture
def ruled_review(client, people):
    make_connection(client, people["admin"], "pg-ruled")
    response = client.post(
        "/api/access-request-rules",
        json={
            "name": "prod-rule",
            "connections": ["pg-ruled"],
            "approval_groups": ["dba", "sre", "sec"],
            "force_approval_groups": ["oncall"],
            "min_approvals": 2,
            "access_max_duration": 3_600_000_000_000,
        },
        headers=people["admin"].headers,
    )
    assert response.status_code == 201, response.text
    return open_session(
        client, people["owner"], "pg-ruled", type="jit", access_duration=7_200_000_000_000
    )["review"]


def test_a_rule_sets_groups_minimum_and_caps_the_duration(ruled_review):
    assert ruled_review["access_request_rule_name"] == "prod-rule"
    assert [e["group"] for e in ruled_review["review_groups_data"]] == ["dba", "sec", "sre"]
    assert ruled_review["min_approvals"] == 2
    assert ruled_review["force_approval_groups"] == ["oncall"]
    assert ruled_review["access_duration"] == 3_600_000_000_000
    assert ruled_review["type"] == "jit"


def test_min_approvals_approves_before_every_group_has(client, people, ruled_review):
    with freeze_time("2026-11-22 08:00:00"):
        decide(client, people["dba"], ruled_review["id"], status="APPROVED")
        body = decide(client, people["sre"], ruled_review["id"], status="APPROVED").json()

    assert body["status"] == "APPROVED"
    # jit: access lasts access_duration from the approval
    assert body["revoke_at"] == "2026-11-22T09:00:00Z"


def test_force_approval_by_a_force_group_member(client, engine, people, ruled_review):
    oncall = make_user(engine, "oscar", ["oncall", "sec"])

    body = decide(client, oncall, ruled_review["id"], status="APPROVED", force_review=True).json()

    assert body["status"] == "APPROVED"
    sec = next(e for e in body["review_groups_data"] if e["group"] == "sec")
    assert sec["forced_review"] is True
    assert sec["status"] == "APPROVED"


def test_force_approval_by_anyone_else_is_403(client, people, ruled_review):
    response = decide(
        client, people["dba"], ruled_review["id"], status="APPROVED", force_review=True
    )

    assert response.status_code == 403
    assert "force-approval group" in response.json()["message"]


def test_a_time_window_is_stored_and_enforced_at_execution(client, people, review):
    window = {"type": "time_range", "configuration": {"start_time": "22:00", "end_time": "02:00"}}
    decide(client, people["dba"], review["id"], status="APPROVED")
    body = decide(client, people["sre"], review["id"], status="APPROVED", time_window=window).json()
    assert body["time_window"] == window
    exec_url = f"/api/sessions/{review['session']}/exec"

    with freeze_time("2026-11-22 12:00:00"):
        outside = client.post(exec_url, headers=people["owner"].headers)
    assert outside.status_code == 403
    assert outside.json()["message"] == "the session may only run between 22:00 and 02:00 UTC"

    with freeze_time("2026-11-23 01:30:00"):
        inside = client.post(exec_url, headers=people["owner"].headers)
    assert inside.status_code == 200
    assert inside.json()["status"] == "running"
    assert inside.json()["review"]["status"] == "PROCESSING"

    again = decide(client, people["admin"], review["id"], status="REVOKED")
    assert again.status_code == 400
    assert "PROCESSING" in again.json()["message"]


def test_an_unapproved_session_cannot_run(client, people, review):
    response = client.post(
        f"/api/sessions/{review['session']}/exec", headers=people["owner"].headers
    )

    assert response.status_code == 403
    assert response.json()["message"] == "the session cannot run: its review is PENDING"


def test_jit_access_ends_at_revoke_at(client, engine, people, ruled_review):
    exec_url = f"/api/sessions/{ruled_review['session']}/exec"
    with freeze_time("2026-11-22 08:00:00"):
        decide(client, people["dba"], ruled_review["id"], status="APPROVED")
        decide(client, people["sre"], ruled_review["id"], status="APPROVED")
    with freeze_time("2026-11-22 08:59:00"):
        assert client.post(exec_url, headers=people["owner"].headers).status_code == 200
    with freeze_time("2026-11-22 09:00:00"):
        late = client.post(exec_url, headers=people["owner"].headers)
    assert late.status_code == 403
    assert "ended at 2026-11-22T09:00:00+00:00" in late.json()["message"]


# -- reading ----------------------------------------------------------------------------------


def test_reviews_are_listed_for_those_who_may_see_them(client, people, review):
    second = open_session(client, people["owner"])["review"]
    decide(client, people["dba"], review["id"], status="REJECTED")

    def ids(person, **params):
        response = client.get("/api/reviews", params=params, headers=people[person].headers)
        assert response.status_code == 200
        return [item["id"] for item in response.json()["items"]]

    assert ids("dba") == [second["id"], review["id"]]
    assert ids("dba", status="PENDING") == [second["id"]]
    assert ids("owner", status="REJECTED") == [review["id"]]
    assert ids("outsider") == []
    assert ids("admin") == [second["id"], review["id"]]
    assert (
        client.get(f"/api/reviews/{review['id']}", headers=people["outsider"].headers).status_code
        == 404
    )


def test_listing_rejects_an_unknown_status_filter(client, people):
    response = client.get("/api/reviews", params={"status": "NOPE"}, headers=people["dba"].headers)

    assert response.status_code == 400
    assert "query.status" in response.json()["message"]


def test_timestamps_are_utc_iso8601(client, people, review):
    created = datetime.fromisoformat(review["created_at"])

    assert review["created_at"].endswith("Z")
    assert created.tzinfo == UTC
