"""Authenticated encryption of configuration secrets at rest (AES-256-GCM).

The key is derived from the service's secret key with HKDF, so one secret protects both token
signing and stored secrets without the two uses ever sharing key material. Each sealed value is
bound to a context (which plugin, which variable) as associated data: a ciphertext copied into
another row or key does not open.
"""

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

FORMAT_PREFIX = "v1."
NONCE_BYTES = 12
KEY_INFO = b"accessgate sealed configuration v1"


class UnsealError(Exception):
    """A sealed value does not open with this key and context (wrong key, or tampered)."""


class SecretBox:
    """Seals and opens values with a key derived from the service's secret key."""

    def __init__(self, secret_key: bytes) -> None:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_INFO).derive(
            secret_key
        )
        self._aead = AESGCM(derived)

    def seal(self, plaintext: bytes, *, context: str) -> str:
        """Encrypt ``plaintext`` for ``context``; the result is printable text."""
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = self._aead.encrypt(nonce, plaintext, context.encode())
        return FORMAT_PREFIX + base64.urlsafe_b64encode(nonce + ciphertext).decode()

    def open(self, sealed: str, *, context: str) -> bytes:
        """Decrypt a value sealed for ``context``, or raise UnsealError."""
        if not sealed.startswith(FORMAT_PREFIX):
            raise UnsealError("unknown sealed value format")
        try:
            raw = base64.urlsafe_b64decode(sealed.removeprefix(FORMAT_PREFIX))
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode())
        except (ValueError, InvalidTag) as exc:
            raise UnsealError("the sealed value does not open with this key") from exc
