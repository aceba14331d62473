"""The signed license: what verifies, what does not, and where its key comes from."""

import copy
import stat
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from models.core import errors
from models.core.settings import Settings
from models.sidecars.license import InvalidLicense, LicenseSigner, license_signer, verify_license

ORGANIZATION_ID = uuid.UUID("7d3c0e1a-5b7e-4a53-9a8e-2f4b6b0c1d2e")
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.fixture
def signer(tmp_path) -> LicenseSigner:
    return license_signer(Settings(data_dir=tmp_path, license_validity_days=30))


def signed(signer: LicenseSigner, now: datetime = NOW) -> dict:
    return signer.license_for(organization_id=ORGANIZATION_ID, organization_name="acme", now=now)


def test_a_license_verifies_with_the_signers_key(signer):
    document = signed(signer)

    payload = verify_license(
        document, trusted_key=signer.private_key().public_key(), now=NOW + timedelta(days=29)
    )

    assert payload == {
        "organization_id": str(ORGANIZATION_ID),
        "organization": "acme",
        "plan": "community",
        "issued_at": "2026-11-22T12:00:00+00:00",
        "expires_at": "2026-12-22T12:00:00+00:00",
        "key_id": document["payload"]["key_id"],
    }


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda doc: doc["payload"].update(plan="enterprise"), "does not verify"),
        (lambda doc: doc["payload"].update(expires_at="2099-01-01T00:00:00+00:00"), "verify"),
        (lambda doc: doc.update(signature=doc["signature"][:-4] + "AAA="), "does not verify"),
        (lambda doc: doc.update(signature="%%%"), "malformed"),
        (lambda doc: doc.update(algorithm="HS256"), "not signed with Ed25519"),
        (lambda doc: doc.pop("payload"), "no payload"),
    ],
)
def test_a_tampered_license_is_refused(signer, tamper, reason):
    document = copy.deepcopy(signed(signer))
    tamper(document)

    with pytest.raises(InvalidLicense, match=reason):
        verify_license(document, trusted_key=signer.private_key().public_key(), now=NOW)


def test_a_license_signed_by_another_key_is_refused_when_the_signer_is_pinned(signer, tmp_path):
    impostor = LicenseSigner(
        key_path=tmp_path / "impostor.pem", plan="enterprise", validity=timedelta(days=9999)
    )
    impostor._key = Ed25519PrivateKey.generate()
    forged = signed(impostor)

    # Consistent in itself: it verifies against the key it carries...
    assert verify_license(forged, trusted_key=None, now=NOW)["plan"] == "enterprise"
    # ...but not against the pinned signer.
    with pytest.raises(InvalidLicense, match="does not verify"):
        verify_license(forged, trusted_key=signer.private_key().public_key(), now=NOW)


def test_an_expired_license_is_refused(signer):
    document = signed(signer)

    with pytest.raises(InvalidLicense, match="expired at 2026-12-22T12:00:00"):
        verify_license(document, trusted_key=None, now=NOW + timedelta(days=30))


def test_the_license_is_re_signed_hourly(signer):
    first = signed(signer)

    assert signed(signer, NOW + timedelta(minutes=59)) is first
    later = signed(signer, NOW + timedelta(hours=1))
    assert later["payload"]["issued_at"] == "2026-11-22T13:00:00+00:00"


def test_the_generated_key_is_private_and_kept(tmp_path):
    settings = Settings(data_dir=tmp_path)
    first = license_signer(settings).public_key_pem()

    key_file = tmp_path / "license_signing_key.pem"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert license_signer(settings).public_key_pem() == first


@pytest.mark.parametrize("content", [None, b"garbage", b"-----BEGIN PRIVATE KEY-----\n-----END"])
def test_an_unreadable_key_makes_the_license_unavailable(tmp_path, content):
    key_file = tmp_path / "configured.pem"
    if content is not None:
        key_file.write_bytes(content)
    signer = license_signer(Settings(data_dir=tmp_path, license_signing_key_file=key_file))

    with pytest.raises(errors.LicenseUnavailable, match="cannot be read"):
        signed(signer)
    assert not key_file.exists() or key_file.read_bytes() == content
