"""Several `accessgate serve` replicas on one PostgreSQL: one deployment, one license key.

The replicas share what the README says they share (the database and ACCESSGATE_SECRET_KEY)
and nothing else: each has a data directory of its own.
"""

import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from testing.postgres import free_port
from testing.processes import accessgate, running_server, token

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

LISTENERS = [{"name": "pg", "connection": "pg-prod", "protocol": "postgres", "port": 5432}]


@pytest.fixture
def replica_environments(environment, tmp_path) -> list[dict[str, str]]:
    """Three replicas' environments: the same database and secret key, their own data dirs."""
    shared_key = secrets.token_urlsafe(48)
    return [
        {
            **environment,
            "ACCESSGATE_SECRET_KEY": shared_key,
            "ACCESSGATE_DATA_DIR": str(tmp_path / f"replica-{n}"),
        }
        for n in range(3)
    ]


@pytest.fixture
def replicas(replica_environments, tmp_path) -> Iterator[list[str]]:
    """The first two replicas, serving."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(running_server(env, free_port(), tmp_path / f"serve-{n}.log"))
            for n, env in enumerate(replica_environments[:2])
        ]


def public_key_of(environment: dict[str, str], path: Path) -> Path:
    """What `accessgate license public-key` prints with this environment, saved to ``path``."""
    result = accessgate(environment, "license", "public-key")
    assert result.returncode == 0, result.stderr
    path.write_text(result.stdout)
    return path


def handshake(environment: dict[str, str], url: str, sidecar_token: str, pinned: Path):
    return accessgate(
        environment,
        "sidecar",
        "handshake",
        "--url",
        url,
        "--token",
        sidecar_token,
        "--version",
        "2.0.0",
        "--public-key",
        str(pinned),
    )


def test_a_license_from_one_replica_verifies_with_the_key_another_publishes(
    replica_environments, replicas, tmp_path
):
    env_a, env_b, env_c = replica_environments
    replica_a, replica_b = replicas
    admin = {"Authorization": "Bearer " + token(env_a, "--sub", "admin", "--groups", "admin")}
    with httpx.Client(base_url=replica_b, headers=admin) as api:
        assert api.post("/connections", json={"name": "pg-prod", "type": "database"}).is_success
        sidecar = api.post("/sidecars", json={"name": "edge-1"}).json()
        assert api.put(f"/sidecars/{sidecar['id']}/config", json={"listeners": LISTENERS})
    key_b = public_key_of(env_b, tmp_path / "published-by-b.pem")

    for url in (replica_a, replica_b):
        result = handshake(env_a, url, sidecar["token"], key_b)
        assert result.returncode == 0, f"{url}: {result.stderr}"
        assert "signature verified with the pinned key" in result.stderr

    rotated = accessgate(env_b, "license", "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    new_key = tmp_path / "rotated.pem"
    new_key.write_text(rotated.stdout)
    assert new_key.read_text() != key_b.read_text()
    assert public_key_of(env_a, tmp_path / "now-published-by-a.pem").read_text() == rotated.stdout

    # A replica started after the rotation signs with the new key; the old pin refuses it.
    with running_server(env_c, free_port(), tmp_path / "serve-c.log") as replica_c:
        assert handshake(env_c, replica_c, sidecar["token"], new_key).returncode == 0
        refused = handshake(env_c, replica_c, sidecar["token"], key_b)
        assert refused.returncode == 1
        assert "refusing the configuration" in refused.stderr
