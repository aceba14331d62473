"""The product as a user runs it: `accessgate token` and `accessgate serve`, then plain HTTP."""

import asyncio
import stat
from pathlib import Path

import httpx
import pytest

from testing.processes import accessgate, token


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_the_readme_walk_through(environment, server):
    admin = {"Authorization": "Bearer " + token(environment, "--sub", "admin", "--groups", "admin")}
    requester = {
        "Authorization": "Bearer "
        + token(environment, "--sub", "rita", "--email", "rita@example.com", "--groups", "dev")
    }
    reviewer = {
        "Authorization": "Bearer "
        + token(environment, "--sub", "dan", "--name", "Dan", "--groups", "dba")
    }

    with httpx.Client(base_url=server) as api:
        assert (
            api.post(
                "/connections", json={"name": "pg-prod", "type": "database"}, headers=admin
            ).status_code
            == 201
        )
        assert (
            api.post(
                "/plugins",
                json={"name": "review", "connections": [{"name": "pg-prod", "config": ["dba"]}]},
                headers=admin,
            ).status_code
            == 201
        )
        session = api.post(
            "/sessions", json={"connection": "pg-prod", "script": "select 1"}, headers=requester
        ).json()
        assert session["review"]["status"] == "PENDING"

        approved = api.put(
            f"/reviews/{session['id']}", json={"status": "APPROVED"}, headers=reviewer
        )
        assert approved.status_code == 200
        assert approved.json()["status"] == "APPROVED"
        assert approved.json()["review_groups_data"][0]["reviewed_by"]["name"] == "Dan"

        executed = api.post(f"/sessions/{session['id']}/exec", headers=requester)
        assert executed.json()["review"]["status"] == "PROCESSING"
        assert api.get("/openapi.json").json()["info"]["version"] == "1.173.0"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_generated_secret_key_is_private_and_stable(environment):
    first = token(environment, "--sub", "a")
    key_file = Path(environment["ACCESSGATE_DATA_DIR"]) / "secret_key"

    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_bytes()
    token(environment, "--sub", "a")
    assert key_file.read_bytes() == key
    assert first.count(".") == 2


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_token_refuses_bad_groups_with_a_message(environment):
    result = accessgate(environment, "token", "--sub", "a", "--groups", "ok,has space")

    assert result.returncode == 2
    assert result.stdout == ""
    assert "group names are 1 to 100 characters without spaces" in result.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_more_simultaneous_approvals_than_worker_threads_all_succeed(environment, server):
    """Regression: requests once held SQLite's write lock while queued for a worker thread."""
    simultaneous = 64  # above the 40 worker threads of the server
    admin = {"Authorization": "Bearer " + token(environment, "--sub", "admin", "--groups", "admin")}
    requester = {
        "Authorization": "Bearer " + token(environment, "--sub", "rita", "--groups", "dev")
    }
    reviewer = {"Authorization": "Bearer " + token(environment, "--sub", "dan", "--groups", "dba")}
    with httpx.Client(base_url=server) as api:
        api.post("/connections", json={"name": "db", "type": "database"}, headers=admin)
        api.post(
            "/plugins",
            json={"name": "review", "connections": [{"name": "db", "config": ["dba"]}]},
            headers=admin,
        )
        review_ids = [
            api.post("/sessions", json={"connection": "db"}, headers=requester).json()["review"][
                "id"
            ]
            for _ in range(simultaneous)
        ]

    async def approve_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=simultaneous)
        async with httpx.AsyncClient(base_url=server, limits=limits, timeout=60) as api:
            return await asyncio.gather(
                *[
                    api.put(f"/reviews/{review_id}", json={"status": "APPROVED"}, headers=reviewer)
                    for review_id in review_ids
                ]
            )

    responses = asyncio.run(approve_all())

    assert [response.status_code for response in responses] == [200] * simultaneous
    with httpx.Client(base_url=server) as api:
        approved = api.get("/reviews", params={"status": "APPROVED", "limit": 200}, headers=admin)
    assert len(approved.json()["items"]) == simultaneous
