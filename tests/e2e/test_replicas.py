"""Several `accessgate serve` replicas on one PostgreSQL: one deployment, one license key.

The replicas share what the README says they share (the database and ACCESSGATE_SECRET_KEY)
and nothing else: each has a data directory of its own.
"""

import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from api.cli.sidecar import perform_handshake
from models.core.clock import utc_now
from models.sidecars.license import load_public_key, verify_license
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


def test_a_license_from_one_replica_verifies_with_the_key_another_publishes(
    replica_environments, replicas, tmp_path
):
    env_a, env_b, env_c = replica_environments
    admin = {"Authorization": "Bearer " + token(env_a, "--sub", "admin", "--groups", "admin")}
    with httpx.Client(base_url=replicas[1], headers=admin) as api:
        assert api.post("/connections", json={"name": "pg-prod", "type": "database"}).is_success
        sidecar = api.post("/sidecars", json={"name": "edge-1"}).json()
        assert api.put(f"/sidecars/{sidecar['id']}/config", json={"listeners": LISTENERS})
    published_by_b = public_key_of(env_b, tmp_path / "published-by-b.pem")

    for url in replicas:  # the sidecar's own check: the license verifies with the pinned key
        body, _ = perform_handshake(
            base_url=url, token=sidecar["token"], version="2.0.0", public_key_file=published_by_b
        )
        assert body["name"] == "edge-1"

    rotated = accessgate(env_c, "license", "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout != published_by_b.read_text()
    assert public_key_of(env_a, tmp_path / "now-published-by-a.pem").read_text() == rotated.stdout
    # Any process reading the key now (a replica starting, or re-signing) signs with the new one.
    shown = accessgate(env_c, "license", "show")
    assert shown.returncode == 0, shown.stderr
    new_key = load_public_key(rotated.stdout.encode())
    verify_license(json.loads(shown.stdout)["license"], trusted_key=new_key, now=utc_now())
