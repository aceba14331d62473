"""The signed license: what verifies, what does not, and where its key comes from."""

import copy
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from models.core import errors
from models.core.db import db_scope
from models.core.deployment_secrets import DeploymentSecret
from models.core.sealing import SecretBox
from models.core.settings import Settings
from models.sidecars.license import (
    InvalidLicense,
    LicenseSigner,
    license_signer,
    new_signing_key,
    verify_license,
)
from tests.factories import TEST_SECRET_KEY

ORGANIZATION_ID = uuid.UUID("7d3c0e1a-5b7e-4a53-9a8e-2f4b6b0c1d2e")
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


BOX = SecretBox(TEST_SECRET_KEY.encode())


@pytest.fixture
def signer(tmp_path, engine) -> LicenseSigner:
    settings = Settings(data_dir=tmp_path, license_validity_days=30)
    return license_signer(settings, engine=engine, secret_box=BOX)


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
        load_key=new_signing_key,
        key_source="an impostor",
        plan="enterprise",
        validity=timedelta(days=9999),
    )
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


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_replicas_sharing_the_database_and_secret_key_sign_with_one_key(tmp_path, engine):
    # Replicas share the database and the secret key, not a disk: each its own data directory.
    replicas = [Settings(data_dir=tmp_path / f"replica-{n}") for n in range(8)]
    barrier = threading.Barrier(len(replicas))

    def public_key(settings: Settings) -> str:
        signer = license_signer(settings, engine=engine, secret_box=BOX)
        barrier.wait()  # every replica asks for the key at the same moment
        return signer.public_key_pem()

    with ThreadPoolExecutor(len(replicas)) as pool:
        keys = set(pool.map(public_key, replicas))

    assert len(keys) == 1
    assert not any((s.data_dir / "license_signing_key.pem").exists() for s in replicas)
    with db_scope(engine) as db:
        stored = db.get_one(DeploymentSecret, "license_signing_key")
    assert "PRIVATE KEY" not in stored.sealed_value, "the key is sealed at rest"


def test_the_key_needs_the_secret_key_it_was_sealed_with(tmp_path, engine):
    license_signer(Settings(data_dir=tmp_path), engine=engine, secret_box=BOX).public_key_pem()
    other_box = SecretBox(b"another-secret-key-of-another-deployment")
    stranger = license_signer(Settings(data_dir=tmp_path), engine=engine, secret_box=other_box)

    with pytest.raises(errors.LicenseUnavailable, match="cannot be read"):
        signed(stranger)


def test_a_key_an_earlier_version_generated_becomes_the_deployments(tmp_path, engine):
    legacy = tmp_path / "license_signing_key.pem"
    legacy.write_bytes(new_signing_key())
    pinned = LicenseSigner(
        load_key=legacy.read_bytes, key_source="the old file", plan="p", validity=timedelta(1)
    ).public_key_pem()

    signer = license_signer(Settings(data_dir=tmp_path), engine=engine, secret_box=BOX)

    assert signer.public_key_pem() == pinned, "sidecars that pinned the old key keep verifying"


@pytest.mark.parametrize("content", [None, b"garbage", b"-----BEGIN PRIVATE KEY-----\n-----END"])
def test_an_unreadable_key_makes_the_license_unavailable(tmp_path, engine, content):
    key_file = tmp_path / "configured.pem"
    if content is not None:
        key_file.write_bytes(content)
    settings = Settings(data_dir=tmp_path, license_signing_key_file=key_file)
    signer = license_signer(settings, engine=engine, secret_box=BOX)

    with pytest.raises(errors.LicenseUnavailable, match="cannot be read"):
        signed(signer)
    assert not key_file.exists() or key_file.read_bytes() == content
