"""Running the `accessgate` command line as a user would, in its own process."""

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ACCESSGATE = [sys.executable, "-m", "api.cli"]


def token(environment: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [*ACCESSGATE, "token", *args], env=environment, capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    assert len(lines) == 1, "token prints one line and nothing else"
    return lines[0]


def accessgate(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run one `accessgate` command; its exit status is the caller's to check."""
    return subprocess.run(
        [*ACCESSGATE, *args], env=environment, capture_output=True, text=True, timeout=60
    )


@dataclass
class ServerProcess:
    """An `accessgate serve` process and the API base URL it answers on."""

    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no lease given back, as when the machine dies."""
        self.process.kill()
        self.process.wait(timeout=10)


@contextmanager
def server_process(
    environment: dict[str, str], port: int, log_path: Path, *, log_level: str = "warning"
) -> Iterator[ServerProcess]:
    """Run `accessgate serve` until the block ends (or it is killed); yield it once it answers."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*ACCESSGATE, "serve", "--port", str(port), "--log-level", log_level],
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
                raise RuntimeError(f"accessgate serve did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield ServerProcess(base_url, process)
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=10)


@contextmanager
def running_server(environment: dict[str, str], port: int, log_path: Path) -> Iterator[str]:
    """Run `accessgate serve` until the block ends; yield its API base URL once it answers."""
    with server_process(environment, port, log_path) as server:
        yield server.url
