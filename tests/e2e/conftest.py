"""Fixtures of the end-to-end tests: the real `accessgate` commands in their own processes."""

import os
from collections.abc import Iterator

import pytest

from testing.postgres import free_port
from testing.processes import running_server


@pytest.fixture
def environment(backend, tmp_path, request) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACCESSGATE_")}
    env["ACCESSGATE_DATA_DIR"] = str(tmp_path / "data")
    if backend == "postgres":
        env["ACCESSGATE_DATABASE_URL"] = request.getfixturevalue("database_url")
    return env


@pytest.fixture
def server_port() -> int:
    return free_port()


@pytest.fixture
def server(environment, server_port, tmp_path) -> Iterator[str]:
    with running_server(environment, server_port, tmp_path / "serve.log") as base_url:
        yield base_url
