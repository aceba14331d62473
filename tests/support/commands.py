"""Running the `accessgate` command line as a user would, in its own process."""

import subprocess
import sys

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
