"""Plain functions that make what tests need: users with tokens, connections, reviews."""

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from models.core.db import db_scope
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user

TEST_SECRET_KEY = "test-secret-key-that-is-long-enough-for-hs256"
TOKENS_ISSUED_AT = datetime(2020, 1, 1, tzinfo=UTC)
TOKEN_LIFETIME = timedelta(days=365 * 30)


@dataclass(frozen=True)
class Person:
    id: uuid.UUID
    sub: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_user(
    engine: Engine,
    sub: str,
    groups: list[str] | None = None,
    *,
    email: str | None = None,
    name: str | None = None,
    now: datetime | None = None,
) -> Person:
    """Create (or update) a user and return it with a valid bearer token."""
    with db_scope(engine) as db:
        user = upsert_user(
            db=db,
            sub=sub,
            email=email if email is not None else f"{sub}@example.com",
            name=name if name is not None else sub.title(),
            groups=groups or [],
        )
    # Tests freeze the clock at various dates; the token must be valid at all of them.
    token = issue_local_token(
        key=TEST_SECRET_KEY.encode(), sub=sub, now=now or TOKENS_ISSUED_AT, ttl=TOKEN_LIFETIME
    )
    return Person(id=user.id, sub=sub, token=token)


def make_connection(client: TestClient, admin: Person, name: str = "pg-prod") -> dict[str, Any]:
    response = client.post(
        "/api/connections", json={"name": name, "type": "database"}, headers=admin.headers
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def configure_review_groups(
    client: TestClient, admin: Person, connection: str, groups: list[str]
) -> None:
    """Make sessions on ``connection`` reviewed by ``groups`` through the review plugin."""
    existing = client.get("/api/plugins/review", headers=admin.headers)
    connections = [{"name": connection, "config": groups}]
    if existing.status_code == 404:
        response = client.post(
            "/api/plugins",
            json={"name": "review", "connections": connections},
            headers=admin.headers,
        )
    else:
        connections += [
            {"id": item["id"], "config": item["config"]}
            for item in existing.json()["connections"]
            if item["name"] != connection
        ]
        response = client.put(
            "/api/plugins/review", json={"connections": connections}, headers=admin.headers
        )
    assert response.status_code in (200, 201), response.text


def open_session(
    client: TestClient, owner: Person, connection: str = "pg-prod", **fields: Any
) -> dict[str, Any]:
    response = client.post(
        "/api/sessions",
        json={"connection": connection, "script": "select 1", **fields},
        headers=owner.headers,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def decide(client: TestClient, person: Person, review_id: str, **body: Any) -> Any:
    return client.put(f"/api/reviews/{review_id}", json=body, headers=person.headers)


class ManualClock:
    """A clock for code that takes one (``clock=``): it reads ``now`` and moves when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
