"""The organization's license: a payload signed with Ed25519, served in the sidecar handshake.

Document shape::

    {"payload": {"organization_id", "organization", "plan", "issued_at", "expires_at",
                 "key_id"},
     "algorithm": "Ed25519",
     "signature": base64url(sign(canonical_json(payload))),
     "public_key": base64url(raw 32-byte public key)}

``canonical_json`` (sorted keys, no spaces, ASCII) makes the signed bytes reproducible from
the parsed payload. The embedded public key only lets a client check integrity; a sidecar
proves who signed by pinning the key (``accessgate license public-key``).

The signing key is a PEM file: the configured one, or one generated once into the data
directory. It is read when a license is needed, so a broken key fails the handshake with a
clear 500 rather than the whole service at start-up.
"""

import base64
import binascii
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from models.core import errors
from models.core.settings import Settings

logger = logging.getLogger("accessgate.license")

ALGORITHM = "Ed25519"
# A served license is re-signed this often, so its issued_at stays recent.
RESIGN_AFTER = timedelta(hours=1)


class InvalidLicense(ValueError):
    """The license does not verify, is malformed, or has expired."""


def canonical_json(payload: Mapping[str, Any]) -> bytes:
    """The exact bytes that are signed for ``payload``."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def _unb64(text: str) -> bytes:
    # Strict: characters outside the base64url alphabet are an error, not skipped.
    return base64.b64decode(text, altchars=b"-_", validate=True)


def raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """A short fingerprint naming the signing key."""
    return hashlib.sha256(raw_public_key(public_key)).hexdigest()[:16]


def generate_signing_key(path: Path) -> None:
    """Write a new signing key to ``path`` unless one is there (O_EXCL, mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with os.fdopen(fd, "wb") as key_file:
        key_file.write(pem)


class LicenseSigner:
    """Signs the organization's license with the key at ``key_path``, re-signing hourly."""

    def __init__(self, *, key_path: Path, plan: str, validity: timedelta) -> None:
        self.key_path = key_path
        self.plan = plan
        self.validity = validity
        self._key: Ed25519PrivateKey | None = None
        self._signed: dict[uuid.UUID, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def private_key(self) -> Ed25519PrivateKey:
        """The signing key, read once; LicenseUnavailable if it cannot be read."""
        if self._key is None:
            try:
                key = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
                if not isinstance(key, Ed25519PrivateKey):
                    raise TypeError("not an Ed25519 key")
            except (OSError, ValueError, TypeError) as exc:
                logger.error("cannot read the license signing key %s: %s", self.key_path, exc)
                raise errors.LicenseUnavailable(
                    "the organization's license cannot be read; the service logged the details"
                ) from exc
            self._key = key
        return self._key

    def public_key_pem(self) -> str:
        """The public half of the signing key, as PEM, for sidecars to pin."""
        return (
            self.private_key()
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def current_license(self, organization_id: uuid.UUID, now: datetime) -> dict[str, Any] | None:
        """The license signed for the organization within the hour, if there is one."""
        cached = self._signed.get(organization_id)
        if cached is None:
            return None
        issued_at: datetime = cached["issued_at"]
        if not issued_at <= now < issued_at + RESIGN_AFTER:
            return None
        document: dict[str, Any] = cached["document"]
        return document

    def license_for(
        self, *, organization_id: uuid.UUID, organization_name: str, now: datetime
    ) -> dict[str, Any]:
        """The signed license of an organization, valid at ``now``."""
        with self._lock:
            document = self.current_license(organization_id, now)
            if document is None:
                document = self._sign(organization_id, organization_name, now)
                self._signed[organization_id] = {"issued_at": now, "document": document}
            return document

    def _sign(
        self, organization_id: uuid.UUID, organization_name: str, now: datetime
    ) -> dict[str, Any]:
        private_key = self.private_key()
        public_key = private_key.public_key()
        payload = {
            "organization_id": str(organization_id),
            "organization": organization_name,
            "plan": self.plan,
            "issued_at": now.isoformat(),
            "expires_at": (now + self.validity).isoformat(),
            "key_id": key_id(public_key),
        }
        return {
            "payload": payload,
            "algorithm": ALGORITHM,
            "signature": _b64(private_key.sign(canonical_json(payload))),
            "public_key": _b64(raw_public_key(public_key)),
        }


def license_signer(settings: Settings) -> LicenseSigner:
    """The signer the settings describe, generating the default key on first use."""
    if settings.license_signing_key_file is None:
        generate_signing_key(settings.license_key_path())
    return LicenseSigner(
        key_path=settings.license_key_path(),
        plan=settings.license_plan,
        validity=timedelta(days=settings.license_validity_days),
    )


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; InvalidLicense if it is not one."""
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise InvalidLicense("the public key file is not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidLicense("the public key is not an Ed25519 key")
    return key


def verify_license(
    document: object, *, trusted_key: Ed25519PublicKey | None, now: datetime
) -> dict[str, Any]:
    """Check a license's signature and expiry; return its payload or raise InvalidLicense.

    With ``trusted_key`` the signature must come from that key; without, from the key the
    document carries (integrity only).
    """
    if not isinstance(document, dict):
        raise InvalidLicense("the license is not an object")
    payload = document.get("payload")
    signature = document.get("signature")
    if not isinstance(payload, dict) or not isinstance(signature, str):
        raise InvalidLicense("the license has no payload or no signature")
    if document.get("algorithm") != ALGORITHM:
        raise InvalidLicense(f"the license is not signed with {ALGORITHM}")
    try:
        signature_bytes = _unb64(signature)
        public_key = trusted_key or Ed25519PublicKey.from_public_bytes(
            _unb64(str(document.get("public_key", "")))
        )
    except (ValueError, binascii.Error) as exc:
        raise InvalidLicense("the license's signature or public key is malformed") from exc
    try:
        public_key.verify(signature_bytes, canonical_json(payload))
    except InvalidSignature as exc:
        raise InvalidLicense("the license signature does not verify") from exc
    try:
        expires_at = datetime.fromisoformat(str(payload["expires_at"]))
    except (KeyError, ValueError) as exc:
        raise InvalidLicense("the license has no valid expires_at") from exc
    if expires_at.tzinfo is None or now >= expires_at:
        raise InvalidLicense(f"the license expired at {expires_at.isoformat()}")
    return payload
