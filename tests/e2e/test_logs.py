"""Structured logs: `accessgate serve` with ACCESSGATE_LOG_FORMAT=json writes one JSON object a
line, each with the request's id, and never the caller's token."""

import json

import httpx
import pytest

from testing.postgres import free_port
from testing.processes import server_process, token

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def test_json_lines_carry_the_request_id_the_caller_and_the_review(environment, tmp_path):
    environment = {**environment, "ACCESSGATE_LOG_FORMAT": "json"}
    bearer = token(environment, "--sub", "ada", "--groups", "admin")
    log = tmp_path / "serve.log"
    review_id = "8b1f0c2e-0000-4000-8000-000000000001"
    with server_process(environment, free_port(), log, log_level="info") as server:
        headers = {"Authorization": f"Bearer {bearer}", "X-Request-ID": "req-42"}
        answer = httpx.get(f"{server.url}/reviews/{review_id}", headers=headers)
        fresh = httpx.get(f"{server.url}/healthz")
        bad_id = httpx.get(f"{server.url}/healthz", headers={"X-Request-ID": "two words"})

    assert answer.status_code == 404
    assert answer.headers["x-request-id"] == "req-42"
    assert len(fresh.headers["x-request-id"]) == 32
    assert bad_id.headers["x-request-id"] != "two words"
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    ours = [line for line in lines if line.get("request_id") == "req-42"]
    assert ours, text
    access = next(line for line in ours if line.get("logger") == "uvicorn.access")
    assert access["user"] == "ada"
    assert access["review_id"] == review_id
    assert access["level"] == "info"
    assert "timestamp" in access
    assert bearer not in text, "never the token"
