"""An attacker on the network against `accessgate serve`: what they send, what they get."""

import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import jwt
import pytest

from testing.oidc_provider import signing_key
from testing.postgres import free_port
from testing.processes import ServerProcess, accessgate, server_process, token

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def raw_request(port: int, data: bytes, *, read_timeout: float = 15) -> bytes:
    """Send ``data`` as is and return everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
        return answer


@dataclass
class Hardened:
    """A server with short timeouts, logging every request as an operator's would."""

    server: ServerProcess
    port: int
    environment: dict[str, str]
    log: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hardened]:
    workdir = tmp_path_factory.mktemp("hardened")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ACCESSGATE_")}
    environment.update(
        {
            "ACCESSGATE_DATA_DIR": str(workdir / "data"),
            "ACCESSGATE_HEADER_TIMEOUT_SECONDS": "0.5",
            "ACCESSGATE_BODY_TIMEOUT_SECONDS": "0.5",
        }
    )
    port, log = free_port(), workdir / "serve.log"
    with server_process(environment, port, log, log_level="info") as server:
        yield Hardened(server, port, environment, log)


# -- bodies and slow clients ------------------------------------------------------------------


def hundred_megabytes() -> Iterator[bytes]:
    for _ in range(100):
        yield b"x" * MIB


def post_chunked(url: str, headers: dict[str, str]) -> tuple[int, object]:
    """POST 100 MB in chunks (the size not known up front); the status, and the body if read."""
    try:
        response = httpx.post(url, content=hundred_megabytes(), headers=headers, timeout=30)
    except httpx.WriteError:  # the server answered and closed while the client was writing
        return 0, None
    return response.status_code, response.json()


def test_large_bodies_are_refused_without_being_read(hardened):
    alice = {"Authorization": f"Bearer {token(hardened.environment, '--sub', 'alice')}"}
    before = rss_bytes(hardened.server.process.pid)

    root_token = token(hardened.environment, "--sub", "root", "--groups", "admin")
    root = {"Authorization": f"Bearer {root_token}"}
    sidecar = httpx.post(f"{hardened.url}/sidecars", json={"name": "edge-big"}, headers=root).json()

    anonymous = post_chunked(f"{hardened.url}/sessions", {})
    signed_in = post_chunked(f"{hardened.url}/sessions", alice)
    handshake = post_chunked(
        f"{hardened.url}/sidecars/handshake", {"gateway-sidecar-token": sidecar["token"]}
    )
    declared = raw_request(
        hardened.port,
        b"POST /api/sidecars/handshake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 104857600\r\n\r\n",
    )

    too_large = {"message": "the request body is larger than the limit of 1,048,576 bytes"}
    assert anonymous in (
        (401, {"message": "send an Authorization: Bearer <token> header"}),
        (0, None),
    )
    assert signed_in in ((413, too_large), (0, None))
    assert handshake in ((413, too_large), (0, None))
    assert declared.startswith(b"HTTP/1.1 413 ")
    assert declared.endswith(json.dumps(too_large, separators=(",", ":")).encode())
    assert rss_bytes(hardened.server.process.pid) - before < 30 * MIB
    # Refused, not broken: the server goes on answering, and has no error to log.
    assert httpx.get(f"{hardened.url}/users/me", headers=alice).status_code == 200
    assert "Traceback" not in hardened.log.read_text()


def test_headers_that_trickle_in_lose_the_connection(hardened):
    with socket.create_connection(("127.0.0.1", hardened.port), timeout=15) as connection:
        connection.sendall(b"GET /api/healthz HTTP/1.1\r\nHost: x\r\n")  # and never the end

        assert connection.recv(1024) == b""  # closed by the server, nothing answered


def test_a_connection_that_sends_nothing_is_closed(hardened):
    with socket.create_connection(("127.0.0.1", hardened.port), timeout=15) as connection:
        assert connection.recv(1024) == b""


def test_a_body_that_trickles_in_is_refused_with_408(hardened):
    alice = token(hardened.environment, "--sub", "alice").encode()
    answer = raw_request(
        hardened.port,
        b"POST /api/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + alice + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )

    assert answer.startswith(b"HTTP/1.1 408 ")
    assert answer.endswith(b'{"message":"the request body did not arrive in time"}')


@pytest.mark.parametrize("credentials", [b"", b"gateway-sidecar-token: ags_wrong\r\n"])
def test_a_handshake_without_a_valid_token_is_refused_before_its_body(hardened, credentials):
    answer = raw_request(
        hardened.port,
        b"POST /api/sidecars/handshake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + credentials
        + b"Content-Length: 500000\r\n\r\n",  # the body never comes: the answer does not wait
    )

    assert answer.startswith(b"HTTP/1.1 401 ")


def test_sign_in_codes_stay_out_of_the_access_log(hardened):
    httpx.get(f"{hardened.url}/callback", params={"code": "c0de-SECRET", "state": "st4te-SECRET"})
    httpx.get(f"{hardened.url}/healthz", params={"probe": "kept"})

    deadline = time.monotonic() + 10
    while "probe=kept" not in hardened.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)  # the access line is written just after the answer
    log = hardened.log.read_text()
    assert "GET /api/callback?code=…&state=… HTTP/1.1" in log
    assert "SECRET" not in log
    assert "GET /api/healthz?probe=kept HTTP/1.1" in log


# -- keys and files ---------------------------------------------------------------------------


@SQLITE
def test_the_data_directory_and_database_files_are_private(environment, tmp_path):
    data_dir = tmp_path / "fresh-data"
    environment = {**environment, "ACCESSGATE_DATA_DIR": str(data_dir)}

    token(environment, "--sub", "alice")

    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data_dir.iterdir()}
    assert files["accessgate.db"] == 0o600
    assert files["secret_key"] == 0o600
    assert all(mode == 0o600 for mode in files.values()), files  # -wal and -shm included


@SQLITE
def test_a_short_secret_key_stops_start_up_with_a_clear_message(environment):
    environment = {**environment, "ACCESSGATE_SECRET_KEY": "too-short"}

    result = accessgate(environment, "token", "--sub", "alice")

    assert result.returncode == 2
    assert result.stderr.startswith(
        "accessgate: ACCESSGATE_SECRET_KEY: must be at least 32 bytes (it is 9)"
    )


# -- OIDC: token checks never wait on the network ---------------------------------------------


class SlowKeyProvider:
    """Discovery and keys of an OpenID provider whose key set can be held mid-answer."""

    def __init__(self) -> None:
        self.key, private_jwk = signing_key("key-1")
        self.jwk = {name: private_jwk[name] for name in ("kty", "n", "e", "kid", "alg", "use")}
        self.jwks_fetches = 0
        self.jwks_held = threading.Event()  # set while a key-set answer is being held
        self.release = threading.Event()
        self.release.set()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    return self._json(provider.discovery())
                if self.path == "/jwks":
                    provider.jwks_fetches += 1
                    if not provider.release.is_set():
                        provider.jwks_held.set()
                        provider.release.wait(timeout=30)
                        provider.jwks_held.clear()
                    return self._json({"keys": [provider.jwk]})
                self.send_response(401)
                self.end_headers()
                return None

            def _json(self, document: dict) -> None:
                body = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def discovery(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/auth",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
        }

    def access_token(self, sub: str, *, kid: str = "key-1") -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": "accessgate", "sub": sub, "iat": now, "exp": now + 600}
        return jwt.encode(
            claims, self.key, algorithm="RS256", headers={"kid": kid, "typ": "at+jwt"}
        )


@SQLITE
def test_unknown_key_ids_never_hold_up_a_valid_token(environment, server_port, tmp_path):
    provider = SlowKeyProvider()
    token(environment, "--sub", "alice")  # the user exists, as after a first sign-in
    environment = {
        **environment,
        "ACCESSGATE_AUTH": "oidc",
        "ACCESSGATE_OIDC_ISSUER_URL": provider.issuer,
        "ACCESSGATE_OIDC_CLIENT_ID": "accessgate",
        "ACCESSGATE_OIDC_CLIENT_SECRET": "secret",
        # A made-up kid may fetch the keys again at once: the worst case for the service.
        "ACCESSGATE_OIDC_JWKS_REFETCH_SECONDS": "0",
    }
    valid = {"Authorization": f"Bearer {provider.access_token('alice')}"}
    with server_process(environment, server_port, tmp_path / "oidc.log") as server:
        assert httpx.get(f"{server.url}/users/me", headers=valid).status_code == 200
        provider.release.clear()  # from now on the provider holds its key set

        def made_up_kid(n: int) -> int:
            forged = provider.access_token("alice", kid=f"made-up-{n}")
            return httpx.get(
                f"{server.url}/users/me", headers={"Authorization": f"Bearer {forged}"}, timeout=60
            ).status_code

        with ThreadPoolExecutor(max_workers=20) as pool:
            refused = [pool.submit(made_up_kid, n) for n in range(20)]
            assert provider.jwks_held.wait(timeout=30)
            answered_while_held = httpx.get(f"{server.url}/users/me", headers=valid, timeout=60)
            # The 19 made-up kids not fetching are answered while the fetch is still held.
            deadline = time.monotonic() + 30
            while sum(f.done() for f in refused) < 19 and time.monotonic() < deadline:
                time.sleep(0.01)
            others = [future for future in refused if future.done()]
            still_held = provider.jwks_held.is_set()
            fetches_while_held = provider.jwks_fetches
            provider.release.set()
            statuses = [future.result() for future in refused]

    assert answered_while_held.status_code == 200
    assert answered_while_held.json()["sub"] == "alice"
    assert still_held  # answered from the keys in hand, not after the fetch
    assert statuses == [401] * 20
    assert len(others) == 19  # refused without waiting behind the fetch in flight
    # The first use's fetch, and the one held: single flight, whatever the made-up kids.
    assert fetches_while_held == 2
