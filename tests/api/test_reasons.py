"""Reasons: a requester says why they need access; an access request rule may require it."""

import pytest
from sqlmodel import select

from models.core.db import db_scope
from models.reviews.schema import Review
from tests.factories import configure_review_groups, make_connection, make_user

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

RULE = {
    "name": "prod-needs-a-reason",
    "connections": ["pg-prod"],
    "approval_groups": ["dba"],
    "require_reason": True,
}


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"]),
        "dev": make_user(engine, "dev", ["dev"]),
    }


def request_access(client, person, **fields):
    body = {"connection": "pg-prod", "script": "select 1", **fields}
    return client.post("/api/sessions", json=body, headers=person.headers)


def test_a_reason_is_stored_on_the_review_and_shown(client, people, engine):
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba"])

    answer = request_access(client, people["dev"], reason="INC-42: restore the orders table")

    assert answer.status_code == 201
    review = answer.json()["review"]
    assert review["reason"] == "INC-42: restore the orders table"
    shown = client.get(f"/api/reviews/{review['id']}", headers=people["dev"].headers).json()
    assert shown["reason"] == "INC-42: restore the orders table"
    with db_scope(engine) as db:
        assert db.exec(select(Review.reason)).one() == "INC-42: restore the orders table"


def test_a_rule_that_requires_a_reason_refuses_a_request_without_one(client, people, engine):
    make_connection(client, people["admin"])
    created = client.post("/api/access-request-rules", json=RULE, headers=people["admin"].headers)
    assert created.status_code == 201
    assert created.json()["require_reason"] is True

    missing = request_access(client, people["dev"])
    blank = request_access(client, people["dev"], reason="   ")
    given = request_access(client, people["dev"], reason="deploy 1.4")

    for refused in (missing, blank):
        assert refused.status_code == 400
        assert refused.json()["message"] == (
            "reason: rule 'prod-needs-a-reason' requires a reason for access to connection "
            "'pg-prod'; say why you need it"
        )
    assert given.status_code == 201
    with db_scope(engine) as db:
        assert db.exec(select(Review.reason)).all() == ["deploy 1.4"]  # the refused left none


def test_a_reason_longer_than_1000_characters_is_refused(client, people):
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba"])

    answer = request_access(client, people["dev"], reason="x" * 1001)

    assert answer.status_code == 400
    assert answer.json()["message"].startswith("invalid request: body.reason")
