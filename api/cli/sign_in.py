"""`accessgate login` and `accessgate whoami`: sign in through a browser, keep the token.

The command listens on a loopback port, asks the service for a login URL that comes back to
that port, opens it in a browser (or prints it), and stores the token the service delivers
there in the credentials file (mode 0600) for later commands.
"""

import json
import os
import sys
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

from api.urls import api_base

LOGIN_TIMEOUT_SECONDS = 300


def credentials_path() -> Path:
    """Where the token is kept (``ACCESSGATE_CREDENTIALS_FILE`` overrides)."""
    configured = os.environ.get("ACCESSGATE_CREDENTIALS_FILE")
    if configured:
        return Path(configured)
    return Path.home() / ".config" / "accessgate" / "credentials.json"


def _token_catcher(delivered: dict[str, str]) -> type[BaseHTTPRequestHandler]:
    """A handler that takes the ``token`` the service redirects the browser back with."""

    class TokenCatcher(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            token = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
            if token:
                delivered["token"] = token
            self.send_response(200 if token else 400)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(b"Signed in to accessgate; close this tab." if token else b"No token.")

        def log_message(self, *_args: object) -> None:
            pass

    return TokenCatcher


def login(*, api_url: str, open_browser: bool) -> int:
    """Run the sign-in flow and store the token; 0 on success."""
    base = api_base(api_url)
    delivered: dict[str, str] = {}
    loopback = HTTPServer(("127.0.0.1", 0), _token_catcher(delivered))
    redirect = f"http://127.0.0.1:{loopback.server_address[1]}/callback"
    try:
        answer = httpx.get(f"{base}/login", params={"redirect": redirect}, timeout=30)
    except httpx.HTTPError as exc:
        print(f"accessgate login: cannot reach {base}: {exc}", file=sys.stderr)
        return 1
    if answer.status_code != 200:
        print(f"accessgate login: {answer.json().get('message', answer.text)}", file=sys.stderr)
        return 1
    login_url = answer.json()["login_url"]
    print(f"Sign in at: {login_url}", flush=True)
    if open_browser:
        webbrowser.open(login_url)
    waiter = threading.Thread(target=loopback.handle_request, daemon=True)
    loopback.timeout = LOGIN_TIMEOUT_SECONDS
    waiter.start()
    waiter.join(LOGIN_TIMEOUT_SECONDS)
    loopback.server_close()
    token = delivered.get("token")
    if not token:
        print("accessgate login: no token came back; sign in again", file=sys.stderr)
        return 1
    _store(base, token)
    print(f"Signed in; the token is in {credentials_path()}")
    return 0


def _store(base: str, token: str) -> None:
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as credentials:
        json.dump({"api": base, "token": token}, credentials)


def whoami() -> int:
    """Print the signed-in user, as the service knows them."""
    return _call_as_signed_in("whoami", "GET", "/users/me")


def link_chat_account(code: str) -> int:
    """Link the chat account that asked for ``code`` (/accessgate link) to the signed-in user."""
    return _call_as_signed_in("chat link", "POST", "/users/me/chat-link", body={"code": code})


def _call_as_signed_in(
    command: str, method: str, path: str, *, body: dict[str, str] | None = None
) -> int:
    """Call the API with the stored sign-in and print its answer; 1 and why when it fails."""
    try:
        stored = json.loads(credentials_path().read_text())
    except (OSError, ValueError):
        print(
            f"accessgate {command}: not signed in; run `accessgate login --api URL`",
            file=sys.stderr,
        )
        return 1
    try:
        answer = httpx.request(
            method,
            f"{stored['api']}{path}",
            headers={"Authorization": f"Bearer {stored['token']}"},
            json=body,
            timeout=30,
        )
    except httpx.HTTPError as exc:
        print(f"accessgate {command}: cannot reach {stored['api']}: {exc}", file=sys.stderr)
        return 1
    if answer.status_code != 200:
        print(f"accessgate {command}: {answer.json().get('message')}", file=sys.stderr)
        return 1
    print(json.dumps(answer.json(), indent=2))
    return 0
