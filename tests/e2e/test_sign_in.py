"""Sign-in against a real OpenID provider on loopback, through `accessgate serve`."""

import base64
import json
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from jwt.algorithms import RSAAlgorithm

from testing.oidc_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    OidcProvider,
    sign_in_at_provider,
    signing_key,
)
from testing.processes import ACCESSGATE, accessgate

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture
def provider(tmp_path, server_port) -> Iterator[OidcProvider]:
    provider = OidcProvider(
        tmp_path, redirect_uris=[f"http://127.0.0.1:{server_port}/api/callback"]
    )
    provider.set_account("alice", email="alice@example.com", name="Alice", groups=["dev"])
    provider.set_account("root", email="root@example.com", name="Root", groups=["admin"])
    provider.start()
    yield provider
    provider.stop()


@pytest.fixture
def environment(environment, provider, server_port) -> dict[str, str]:
    return {
        **environment,
        "ACCESSGATE_AUTH": "oidc",
        "ACCESSGATE_PUBLIC_URL": f"http://127.0.0.1:{server_port}",
        "ACCESSGATE_OIDC_ISSUER_URL": provider.issuer,
        "ACCESSGATE_OIDC_CLIENT_ID": CLIENT_ID,
        "ACCESSGATE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
    }


def sign_in(server: str, login: str) -> httpx.Response:
    """The whole code flow in a fresh browser: login URL, provider pages, callback."""
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        login_url = browser.get(f"{server}/login").json()["login_url"]
        return sign_in_at_provider(browser, login_url, login)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_first_sign_in_signs_the_user_up(server, provider):
    answer = sign_in(server, "alice")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["token_type"] == "Bearer"
    assert body["user"]["sub"] == "alice"
    me = httpx.get(f"{server}/users/me", headers=bearer(body["access_token"]))
    assert me.status_code == 200
    assert me.json()["email"] == "alice@example.com"
    assert me.json()["name"] == "Alice"
    assert me.json()["groups"] == ["dev"]


def test_groups_changed_at_the_provider_apply_at_the_next_sign_in(server, provider):
    first = sign_in(server, "alice").json()
    provider.set_account("alice", email="alice@corp.example", name="Alice B", groups=["dba", "sre"])

    # Until she signs in again, the service keeps what it learned at the last sign-in.
    before = httpx.get(f"{server}/users/me", headers=bearer(first["access_token"])).json()
    second = sign_in(server, "alice").json()
    after = httpx.get(f"{server}/users/me", headers=bearer(second["access_token"])).json()

    assert before["groups"] == ["dev"]
    assert after["groups"] == ["dba", "sre"]
    assert after["email"] == "alice@corp.example"
    assert after["name"] == "Alice B"


def test_an_inactive_user_is_refused_and_gets_no_token(server, provider):
    root = sign_in(server, "root").json()
    alice = sign_in(server, "alice").json()
    deactivated = httpx.patch(
        f"{server}/users/{alice['user']['id']}",
        json={"status": "inactive"},
        headers=bearer(root["access_token"]),
    )
    assert deactivated.status_code == 200, deactivated.text

    refused = sign_in(server, "alice")
    old_token = httpx.get(f"{server}/users/me", headers=bearer(alice["access_token"]))

    assert refused.status_code == 403
    assert refused.json() == {"message": "your account is inactive; ask an administrator"}
    assert "access_token" not in refused.text
    assert old_token.status_code == 403


def forged(
    claims: dict, *, alg: str = "RS256", kid: str = "key-1", key=None, typ: str | None = "at+jwt"
) -> str:
    """A JWT access token (RFC 9068 ``typ``) unless ``typ`` says otherwise."""
    header = {"kid": kid} if typ is None else {"kid": kid, "typ": typ}
    if alg == "none":
        encoded = base64.urlsafe_b64encode(json.dumps({"alg": "none", **header}).encode())
        payload = base64.urlsafe_b64encode(json.dumps(claims).encode())
        return f"{encoded.decode().rstrip('=')}.{payload.decode().rstrip('=')}."
    return jwt.encode(claims, key, algorithm=alg, headers=header)


@pytest.mark.parametrize(
    "tamper",
    [
        "alg none",
        "foreign key",
        "wrong audience",
        "wrong issuer",
        "expired",
        "garbage",
        "unknown opaque",
    ],
)
def test_tokens_not_from_the_provider_are_refused(server, provider, tamper):
    sign_in(server, "alice")
    claims = {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "alice",
        "iat": 1_700_000_000,
        "exp": 4_000_000_000,
    }
    # The provider's own signing key: these tokens fail only on what the test changed.
    provider_key = RSAAlgorithm.from_jwk(json.dumps(provider.keys[0]))
    foreign_key, _ = signing_key("key-1")
    token = {
        "alg none": lambda: forged(claims, alg="none"),
        "foreign key": lambda: forged(claims, key=foreign_key),
        "wrong audience": lambda: forged({**claims, "aud": "other"}, key=provider_key),
        "wrong issuer": lambda: forged({**claims, "iss": "http://evil"}, key=provider_key),
        "expired": lambda: forged({**claims, "exp": 1_000_000_000}, key=provider_key),
        "garbage": lambda: "a.b.c",
        "unknown opaque": lambda: "opaque-token-the-provider-never-issued",
    }[tamper]()

    response = httpx.get(f"{server}/users/me", headers=bearer(token))

    assert response.status_code == 401
    assert response.json()["message"]


def test_a_tampered_access_token_is_refused(server, provider):
    token = sign_in(server, "alice").json()["access_token"]

    response = httpx.get(f"{server}/users/me", headers=bearer(token[:-2] + "xx"))

    assert response.status_code == 401


def test_sign_in_keeps_working_after_the_provider_rotates_its_keys(server, provider):
    assert sign_in(server, "alice").status_code == 200

    provider.rotate_keys()

    answer = sign_in(server, "alice")
    assert answer.status_code == 200, answer.text
    me = httpx.get(f"{server}/users/me", headers=bearer(answer.json()["access_token"]))
    assert me.status_code == 200


def test_a_callback_without_a_known_attempt_is_refused(server, provider):
    response = httpx.get(f"{server}/callback", params={"code": "x", "state": "never-issued"})

    assert response.status_code == 401
    assert response.json() == {"message": "this sign-in is unknown or expired; start it again"}


def test_login_refuses_a_redirect_that_is_not_loopback(server, provider):
    response = httpx.get(f"{server}/login", params={"redirect": "https://evil.example/steal"})

    assert response.status_code == 400
    assert "redirect must be an http://127.0.0.1" in response.json()["message"]


def test_accessgate_login_and_whoami(server, environment, tmp_path):
    environment = {**environment, "ACCESSGATE_CREDENTIALS_FILE": str(tmp_path / "creds.json")}
    command = subprocess.Popen(
        [*ACCESSGATE, "login", "--api", server.removesuffix("/api"), "--no-browser"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert command.stdout is not None
    first_line = command.stdout.readline()
    assert first_line.startswith("Sign in at: "), first_line
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        delivered = sign_in_at_provider(
            browser, first_line.removeprefix("Sign in at: ").strip(), "alice"
        )
    out, err = command.communicate(timeout=30)

    assert delivered.status_code == 200
    assert command.returncode == 0, err
    assert "Signed in" in out
    assert stat.S_IMODE((tmp_path / "creds.json").stat().st_mode) == 0o600
    shown = accessgate(environment, "whoami")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["sub"] == "alice"


def test_a_jwt_access_token_signed_by_the_provider_is_accepted(server, provider):
    """The control for the refusals above: the same claims, unchanged, pass."""
    sign_in(server, "alice")
    provider_key = RSAAlgorithm.from_jwk(json.dumps(provider.keys[0]))
    claims = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "alice", "iat": 1_700_000_000}
    token = forged({**claims, "exp": 4_000_000_000}, key=provider_key)

    response = httpx.get(f"{server}/users/me", headers=bearer(token))

    assert response.status_code == 200, response.text
    assert response.json()["sub"] == "alice"


def test_an_id_token_is_not_accepted_as_a_bearer_token(server, provider):
    """Signed by the provider for this client, with a nonce: an ID token. It says who signed
    in, and is no permission to call the API."""
    sign_in(server, "alice")
    provider_key = RSAAlgorithm.from_jwk(json.dumps(provider.keys[0]))
    claims = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "alice", "iat": 1_700_000_000}
    id_token = forged({**claims, "exp": 4_000_000_000, "nonce": "n"}, key=provider_key, typ=None)

    response = httpx.get(f"{server}/users/me", headers=bearer(id_token))

    assert response.status_code == 401
    assert response.json() == {"message": "the identity provider does not accept this token"}


def row_counts(environment: dict[str, str]) -> dict[str, int]:
    database = sqlite3.connect(Path(environment["ACCESSGATE_DATA_DIR"]) / "accessgate.db")
    try:
        tables = [
            name
            for (name,) in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {
            table: database.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            for table in tables
        }
    finally:
        database.close()


def test_anonymous_login_urls_write_nothing_and_any_of_them_signs_in(server, provider, environment):
    before = row_counts(environment)

    urls = [httpx.get(f"{server}/login").json()["login_url"] for _ in range(30)]

    assert row_counts(environment) == before
    assert len(set(urls)) == 30
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        signed_in = sign_in_at_provider(browser, urls[17], "alice")
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["user"]["sub"] == "alice"


def test_repeated_failed_sign_ins_from_one_address_get_429(server, provider):
    statuses = [
        httpx.get(f"{server}/callback", params={"code": "x", "state": f"forged-{n}"}).status_code
        for n in range(21)
    ]

    assert statuses == [401] * 20 + [429]
    blocked = httpx.get(f"{server}/callback", params={"code": "x", "state": "forged"})
    assert blocked.status_code == 429
    assert blocked.json()["message"].startswith("too many failed sign-ins; try again in ")
    assert 0 < int(blocked.headers["retry-after"]) <= 60
