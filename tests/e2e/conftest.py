"""Fixtures of the end-to-end tests: the real `accessgate` commands in their own processes."""

import os
import shutil
from collections.abc import Iterator

import pytest

from testing.postgres import free_port
from testing.processes import running_server

SQLITE_FILE = "accessgate.db"  # where the service keeps SQLite in its data directory


@pytest.fixture
def environment(backend, tmp_path, request) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACCESSGATE_")}
    data_dir = tmp_path / "data"
    env["ACCESSGATE_DATA_DIR"] = str(data_dir)
    if backend == "postgres":
        env["ACCESSGATE_DATABASE_URL"] = request.getfixturevalue("database_url")
    else:
        # A database migrated once per run, as on PostgreSQL: each server and command started
        # on a fresh one would otherwise spend most of a second migrating it again.
        data_dir.mkdir()
        shutil.copyfile(request.getfixturevalue("sqlite_template"), data_dir / SQLITE_FILE)
    return env


@pytest.fixture
def server_port() -> int:
    return free_port()


@pytest.fixture
def server(environment, server_port, tmp_path) -> Iterator[str]:
    with running_server(environment, server_port, tmp_path / "serve.log") as base_url:
        yield base_url
