"""Fixtures of the end-to-end tests: the real `accessgate` commands in their own processes."""

import os
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.commands import ACCESSGATE
from tests.support.postgres import free_port


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
    port = server_port
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*ACCESSGATE, "serve", "--port", str(port), "--log-level", "warning"],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base_url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"accessgate serve did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
