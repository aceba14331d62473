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

The signing key is the deployment's: generated once by whichever replica needs it first and
kept sealed in the database (``models.core.deployment_secrets``), so every replica signs with the
same key and sidecars verify licenses from any of them with one pinned public key. A key file
(``ACCESSGATE_LICENSE_SIGNING_KEY_FILE``) overrides it. The key is read when a license is
needed, so a broken key fails the handshake with a clear 500 rather than the whole service at
start-up.
"""

import base64
import binascii
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import Engine
from sqlmodel import Session

from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.deployment_secrets import deployment_secret, replace_deployment_secret
from models.core.sealing import SecretBox, UnsealError
from models.core.settings import Settings

logger = logging.getLogger("accessgate.license")

ALGORITHM = "Ed25519"
SIGNING_KEY_SECRET = "license_signing_key"  # noqa: S105 - the name it is stored under
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


def new_signing_key() -> bytes:
    """A fresh Ed25519 private key, as PEM."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def deployment_signing_key(
    *, db: Session, secret_box: SecretBox, legacy_key_path: Path, now: datetime
) -> bytes:
    """The deployment's signing key (PEM), created by the first replica that needs it.

    A key an earlier version generated into the data directory becomes the deployment's key,
    so sidecars that pinned it keep verifying.
    """

    def create() -> bytes:
        if legacy_key_path.is_file():
            return legacy_key_path.read_bytes()
        return new_signing_key()

    return deployment_secret(
        db=db, secret_box=secret_box, name=SIGNING_KEY_SECRET, create=create, now=now
    )


def rotate_signing_key(*, db: Session, secret_box: SecretBox, now: datetime) -> None:
    """Give the deployment a new signing key; replicas sign with it from their next re-signing."""
    replace_deployment_secret(
        db=db, secret_box=secret_box, name=SIGNING_KEY_SECRET, value=new_signing_key(), now=now
    )


class LicenseSigner:
    """Signs the organization's license with the key ``load_key`` gives, re-signing hourly."""

    def __init__(
        self, *, load_key: Callable[[], bytes], key_source: str, plan: str, validity: timedelta
    ) -> None:
        self.key_source = key_source  # where the key comes from, for messages
        self._load_key = load_key
        self.plan = plan
        self.validity = validity
        self._key: Ed25519PrivateKey | None = None
        self._signed: dict[uuid.UUID, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def private_key(self) -> Ed25519PrivateKey:
        """The signing key, read once; LicenseUnavailable if it cannot be read."""
        if self._key is None:
            try:
                key = serialization.load_pem_private_key(self._load_key(), None)
                if not isinstance(key, Ed25519PrivateKey):
                    raise TypeError("not an Ed25519 key")
            except (OSError, ValueError, TypeError, UnsealError) as exc:
                logger.error("cannot read the license signing key (%s): %s", self.key_source, exc)
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
                self._key = None  # read the key again: a rotated key reaches every replica
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


def license_signer(settings: Settings, *, engine: Engine, secret_box: SecretBox) -> LicenseSigner:
    """The signer the settings describe: the configured key file, or the deployment's key."""
    validity = timedelta(days=settings.license_validity_days)
    key_file = settings.license_signing_key_file
    if key_file is not None:
        return LicenseSigner(
            load_key=key_file.read_bytes,
            key_source=str(key_file),
            plan=settings.license_plan,
            validity=validity,
        )

    def from_database() -> bytes:
        with db_scope(engine) as db:
            return deployment_signing_key(
                db=db,
                secret_box=secret_box,
                legacy_key_path=settings.license_key_path(),
                now=utc_now(),
            )

    return LicenseSigner(
        load_key=from_database,
        key_source="the database",
        plan=settings.license_plan,
        validity=validity,
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
