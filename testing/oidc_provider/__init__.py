"""A real OpenID provider on loopback (the npm package oidc-provider), driven by the tests."""

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from testing.postgres import free_port

SERVER_SCRIPT = Path(__file__).parent / "server.mjs"
CLIENT_ID = "accessgate"
CLIENT_SECRET = "accessgate-test-client-secret"


def signing_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict[str, Any]]:
    """A fresh RSA key and its private JWK, as the provider is configured with."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(key))
    jwk.update(kid=kid, alg="RS256", use="sig")
    return key, jwk


class OidcProvider:
    """Runs server.mjs with clients, accounts and signing keys the test chooses."""

    def __init__(self, workdir: Path, redirect_uris: list[str]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.redirect_uris = redirect_uris
        self.accounts_file = workdir / "accounts.json"
        self.accounts: dict[str, dict[str, Any]] = {}
        self.keys: list[dict[str, Any]] = [signing_key("key-1")[1]]
        self.process: subprocess.Popen[str] | None = None

    def set_account(self, sub: str, *, email: str, name: str, groups: list[str]) -> None:
        """Create or change a user at the provider (read at its next lookup)."""
        self.accounts[sub] = {"email": email, "name": name, "groups": groups}
        self.accounts_file.write_text(json.dumps(self.accounts))

    def start(self) -> "OidcProvider":
        self.accounts_file.write_text(json.dumps(self.accounts))
        config = {
            "issuer": self.issuer,
            "port": self.port,
            "accounts_file": str(self.accounts_file),
            "jwks": {"keys": self.keys},
            "clients": [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": self.redirect_uris,
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                }
            ],
        }
        config_path = self.workdir / "provider.json"
        config_path.write_text(json.dumps(config))
        log_path = self.workdir / "provider.log"
        with log_path.open("w") as log:
            self.process = subprocess.Popen(
                ["node", str(SERVER_SCRIPT), str(config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + 30
        while "ready" not in log_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenID provider did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def rotate_keys(self) -> None:
        """Sign with a new key from now on (the old one is retired), as a restart would."""
        self.stop()
        self.keys = [signing_key(f"key-{len(self.keys) + 1}")[1]]
        self.start()


def sign_in_at_provider(browser: httpx.Client, login_url: str, login: str) -> httpx.Response:
    """Walk the provider's own login and consent pages as a person would, then follow it back.

    Returns the first answer that does not come from the provider (the service's callback).
    """
    response = browser.get(login_url)
    for _ in range(6):
        page = response.text
        if response.status_code != 200 or 'name="prompt"' not in page:
            return response
        action = re.search(r'<form[^>]*action="([^"]+)"', page)
        assert action is not None, page
        prompt = re.search(r'name="prompt" value="(\w+)"', page)
        assert prompt is not None, page
        form = {"prompt": prompt.group(1)}
        if form["prompt"] == "login":
            form |= {"login": login, "password": "any"}
        response = browser.post(httpx.URL(str(response.url)).join(action.group(1)), data=form)
    raise AssertionError("the provider kept asking")
