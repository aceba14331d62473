"""The reference sidecar client: handshake, verify the license, print the configuration.

Used by ``accessgate sidecar handshake``; a real sidecar does the same at start-up.
"""

import json
import sys
from pathlib import Path
from typing import Any

import httpx

from api.urls import api_base
from models.core.clock import utc_now
from models.sidecars.license import InvalidLicense, load_public_key, verify_license
from models.sidecars.service import TOKEN_HEADER


class HandshakeFailed(Exception):
    """The handshake did not produce a configuration this sidecar can trust."""


def perform_handshake(
    *, base_url: str, token: str, version: str, public_key_file: Path | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Handshake and verify the license; return the response and the license's payload."""
    trusted_key = None
    if public_key_file is not None:
        try:
            trusted_key = load_public_key(public_key_file.read_bytes())
        except OSError as exc:
            raise HandshakeFailed(f"cannot read the public key file: {exc.strerror}") from exc
        except InvalidLicense as exc:
            raise HandshakeFailed(str(exc)) from exc
    try:
        response = httpx.post(
            f"{api_base(base_url)}/sidecars/handshake",
            json={"version": version},
            headers={TOKEN_HEADER: token},
            timeout=30,
        )
    except httpx.HTTPError as exc:
        raise HandshakeFailed(f"cannot reach the service: {exc}") from exc
    body = _json_or_none(response)
    if response.status_code != 200:
        message = body.get("message") if isinstance(body, dict) else None
        raise HandshakeFailed(
            f"the service answered {response.status_code}: {message or response.text[:200]}"
        )
    if not isinstance(body, dict):
        raise HandshakeFailed("the service answered 200 without a JSON object")
    try:
        payload = verify_license(body.get("license"), trusted_key=trusted_key, now=utc_now())
    except InvalidLicense as exc:
        raise HandshakeFailed(f"refusing the configuration: {exc}") from exc
    return body, payload


def _json_or_none(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def run(*, base_url: str, token: str, version: str, public_key_file: Path | None) -> int:
    """CLI entry: print the configuration on success; a message and status 1 otherwise."""
    try:
        body, license_payload = perform_handshake(
            base_url=base_url, token=token, version=version, public_key_file=public_key_file
        )
    except HandshakeFailed as exc:
        print(f"accessgate sidecar handshake: {exc}", file=sys.stderr)
        return 1
    signer = "the pinned key" if public_key_file else "the key it carries (use --public-key to pin)"
    print(
        f"sidecar {body.get('name')!r} ({body.get('id')}): license for "
        f"{license_payload.get('organization')!r}, plan {license_payload.get('plan')!r}, "
        f"expires {license_payload.get('expires_at')}, signature verified with {signer}",
        file=sys.stderr,
    )
    print(json.dumps(body.get("config"), indent=2))
    return 0
