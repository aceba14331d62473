"""Webhook endpoints and deliveries through the API: the contract, secrets, and who may."""

import pytest
from sqlmodel import select

from models.core.db import db_scope
from models.webhooks.schema import WebhookEndpoint
from tests.factories import make_user

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture
def dev(engine):
    return make_user(engine, "dev", ["dev"])


def create(client, admin, **body):
    return client.post(
        "/api/webhooks/endpoints",
        json={"url": "https://hooks.example/accessgate", **body},
        headers=admin.headers,
    )


def test_an_endpoint_shows_its_secret_once_and_keeps_it_sealed(client, engine, admin):
    created = create(client, admin, events=["review.approved", "review.created"])

    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"id", "url", "events", "enabled", "secret", "created_at"}
    assert body["secret"].startswith("whsec_")
    assert body["events"] == ["review.approved", "review.created"]
    shown = client.get(f"/api/webhooks/endpoints/{body['id']}", headers=admin.headers).json()
    assert "secret" not in shown
    assert [
        e["id"] for e in client.get("/api/webhooks/endpoints", headers=admin.headers).json()
    ] == [body["id"]]
    with db_scope(engine) as db:
        stored = db.exec(select(WebhookEndpoint)).one()
    assert body["secret"] not in stored.sealed_secret


def test_update_rotate_and_delete(client, admin):
    endpoint = create(client, admin).json()
    url = f"/api/webhooks/endpoints/{endpoint['id']}"

    updated = client.put(url, json={"enabled": False, "events": []}, headers=admin.headers)
    rotated = client.post(f"{url}/rotate-secret", headers=admin.headers)
    deleted = client.delete(url, headers=admin.headers)

    assert updated.status_code == 200
    assert updated.json()["enabled"] is False
    assert updated.json()["url"] == endpoint["url"]
    assert rotated.status_code == 200
    assert rotated.json()["secret"].startswith("whsec_")
    assert rotated.json()["secret"] != endpoint["secret"]
    assert deleted.status_code == 204
    assert client.get(url, headers=admin.headers).status_code == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"url": "ftp://files.example/x"}, "url"),
        ({"url": "https://user:pw@hooks.example/"}, "credentials"),
        ({"url": "https://hooks.example/", "events": ["review.maybe"]}, "events"),
        ({"url": ""}, "url"),
    ],
)
def test_bad_endpoints_are_400(client, admin, body, fragment):
    answer = client.post("/api/webhooks/endpoints", json=body, headers=admin.headers)

    assert answer.status_code == 400
    assert fragment in answer.json()["message"]


def test_webhooks_are_for_admins(client, dev, admin):
    endpoint = create(client, admin).json()

    assert create(client, dev).status_code == 403
    assert client.get("/api/webhooks/endpoints", headers=dev.headers).status_code == 403
    assert client.get("/api/webhooks/deliveries", headers=dev.headers).status_code == 403
    assert (
        client.delete(f"/api/webhooks/endpoints/{endpoint['id']}", headers=dev.headers).status_code
        == 403
    )


def test_only_a_failed_delivery_is_retried(client, admin):
    unknown = client.post("/api/webhooks/deliveries/12345/retry", headers=admin.headers)

    assert unknown.status_code == 404
