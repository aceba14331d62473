"""A sidecar's life through the real commands: `accessgate license` and `accessgate sidecar`."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from models.core.clock import utc_now
from models.sidecars.license import load_public_key, verify_license
from testing.processes import accessgate, token

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

LISTENERS = [{"name": "pg", "connection": "pg-prod", "protocol": "postgres", "port": 5432}]


@pytest.fixture
def admin(environment) -> dict[str, str]:
    return {"Authorization": "Bearer " + token(environment, "--sub", "admin", "--groups", "admin")}


@pytest.fixture
def sidecar(server, admin) -> dict[str, str]:
    """A registered sidecar with one listener."""
    with httpx.Client(base_url=server, headers=admin) as api:
        assert api.post("/connections", json={"name": "pg-prod", "type": "database"}).is_success
        created = api.post("/sidecars", json={"name": "edge-1"}).json()
        assigned = api.put(f"/sidecars/{created['id']}/config", json={"listeners": LISTENERS})
        assert assigned.status_code == 200, assigned.text
    return created


@pytest.fixture
def signer_pem(environment, tmp_path, server) -> Path:
    result = accessgate(environment, "license", "public-key")
    assert result.returncode == 0, result.stderr
    path = tmp_path / "signer.pem"
    path.write_text(result.stdout)
    return path


def handshake(environment, url, sidecar_token, *extra: str):
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
        *extra,
    )


def test_license_show_prints_a_license_its_public_key_verifies(environment, server):
    result = accessgate(environment, "license", "show")

    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    public_key = load_public_key(shown["public_key"].encode())
    payload = verify_license(shown["license"], trusted_key=public_key, now=utc_now())
    assert payload["organization"] == "default"


def test_the_sidecar_client_handshakes_and_prints_its_configuration(
    environment, server, admin, sidecar, signer_pem
):
    result = handshake(environment, server, sidecar["token"], "--public-key", str(signer_pem))

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"listeners": LISTENERS}
    assert "signature verified with the pinned key" in result.stderr
    shown = httpx.get(f"{server}/sidecars/{sidecar['id']}", headers=admin).json()
    assert shown["version"] == "2.0.0"
    assert shown["last_seen_at"] is not None


def test_the_url_may_be_the_server_root(environment, server, sidecar):
    result = handshake(environment, server.removesuffix("/api"), sidecar["token"])

    assert result.returncode == 0, result.stderr
    assert "use --public-key to pin" in result.stderr


def test_the_client_exits_non_zero_on_a_refused_token(environment, server, sidecar):
    result = handshake(environment, server, sidecar["token"] + "x")

    assert result.returncode == 1
    assert result.stdout == ""
    assert "the service answered 401: the sidecar token is not valid" in result.stderr


def test_the_client_exits_non_zero_without_listeners(environment, server, admin, sidecar):
    created = httpx.post(f"{server}/sidecars", json={"name": "bare"}, headers=admin).json()

    result = handshake(environment, server, created["token"])

    assert result.returncode == 1
    assert "the service answered 412: sidecar 'bare' has no listeners assigned" in result.stderr


def test_the_client_refuses_a_license_from_another_signer(environment, server, sidecar, tmp_path):
    other = tmp_path / "other.pem"
    other.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    result = handshake(environment, server, sidecar["token"], "--public-key", str(other))

    assert result.returncode == 1
    assert result.stdout == ""
    assert "refusing the configuration: the license signature does not verify" in result.stderr


@pytest.fixture
def tampering_proxy(server) -> Iterator[str]:
    """A man in the middle that upgrades the license's plan on the way to the sidecar."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            upstream = httpx.post(
                f"{server}/sidecars/handshake",
                content=self.rfile.read(int(self.headers["Content-Length"])),
                headers={
                    "gateway-sidecar-token": self.headers["gateway-sidecar-token"],
                    "Content-Type": "application/json",
                },
            )
            body = upstream.json()
            body["license"]["payload"]["plan"] = "enterprise"
            data = json.dumps(body).encode()
            self.send_response(upstream.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}/api"
    finally:
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
def test_the_client_refuses_a_tampered_license(
    environment, sidecar, signer_pem, tampering_proxy, pinned
):
    extra = ("--public-key", str(signer_pem)) if pinned else ()

    result = handshake(environment, tampering_proxy, sidecar["token"], *extra)

    assert result.returncode == 1
    assert result.stdout == ""
    assert "the license signature does not verify" in result.stderr
