"""Requests generated from the API's own document, as an admin, a reviewer and a sidecar.

Whatever a client sends that the document allows (and much that it does not), the server
answers without a 5xx, every error as ``{"message": ...}``, and every answer as documented:
status, content type, headers and body schema.
"""

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from testing.postgres import free_port
from testing.processes import ServerProcess, server_process, token

EXAMPLES_PER_OPERATION = 6


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("fuzzing")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ACCESSGATE_")}
    environment["ACCESSGATE_DATA_DIR"] = str(workdir / "data")
    with server_process(environment, free_port(), workdir / "serve.log") as server:
        server.environment = environment  # type: ignore[attr-defined]
        yield server


@pytest.fixture(scope="module")
def identities(fuzzed_server: ServerProcess) -> dict[str, dict[str, str]]:
    environment = fuzzed_server.environment  # type: ignore[attr-defined]
    admin = {"Authorization": f"Bearer {token(environment, '--sub', 'ada', '--groups', 'admin')}"}
    reviewer = {"Authorization": f"Bearer {token(environment, '--sub', 'dan', '--groups', 'dba')}"}
    api = fuzzed_server.url
    # Some data to find, so generated ids and names sometimes reach the real logic.
    httpx.post(f"{api}/connections", json={"name": "pg-prod", "type": "database"}, headers=admin)
    httpx.post(
        f"{api}/plugins",
        json={"name": "review", "connections": [{"name": "pg-prod", "config": ["dba"]}]},
        headers=admin,
    )
    sidecar = httpx.post(f"{api}/sidecars", json={"name": "edge-1"}, headers=admin).json()
    httpx.put(
        f"{api}/sidecars/{sidecar['id']}/config",
        json={"listeners": [{"name": "pg", "connection": "pg-prod", "port": 5432}]},
        headers=admin,
    )
    return {
        "admin": admin,
        "reviewer": reviewer,
        "sidecar": {"gateway-sidecar-token": sidecar["token"]},
    }


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: ServerProcess) -> Any:
    return schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json")


def errors_have_a_message(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx and 5xx answer is ``{"message": "<a sentence>"}``."""
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict), body
        assert set(body) == {"message"}, body
        assert isinstance(body["message"], str)
        assert body["message"], body
    return None


CHECKS = [
    checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.response_headers_conformance,
    errors_have_a_message,
]


def test_the_api_answers_every_generated_request_as_documented(
    api_schema: Any, identities: dict[str, dict[str, str]]
) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 30

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def answers_as_documented(case: Any) -> None:
            for headers in identities.values():
                response = case.call(headers=headers, timeout=30)
                case.validate_response(response, checks=CHECKS)

        answers_as_documented()
