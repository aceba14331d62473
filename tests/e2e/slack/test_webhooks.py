"""Webhooks end to end: `accessgate serve` with the webhooks plugin, the Slack server, and two
real HTTP receivers on loopback, one healthy and one that answers 500 and then times out."""

import json
import time
from collections import Counter, defaultdict

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from testing.postgres import free_port
from testing.processes import server_process
from testing.receivers import Receiver
from tests.e2e.slack.gateway import CHANNEL, card_of, set_up_gateway, wait_for_text

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture
def environment(environment) -> dict[str, str]:
    environment["ACCESSGATE_WEBHOOK_RETRY_SCHEDULE"] = "0.2s,0.2s"  # three attempts in all
    environment["ACCESSGATE_WEBHOOK_TIMEOUT_SECONDS"] = "1"
    environment["ACCESSGATE_OUTBOX_LEASE_SECONDS"] = "2"
    return environment


def add_endpoint(api: httpx.Client, admin: dict[str, str], url: str) -> dict:
    created = api.post("/webhooks/endpoints", json={"url": url}, headers=admin)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["secret"].startswith("whsec_")
    assert body["events"] == []
    assert body["enabled"] is True
    return body


def events_by_review(received) -> dict[str, list[str]]:
    order: dict[str, list[str]] = defaultdict(list)
    for message in received:
        body = json.loads(message.body)
        order[body["data"].get("review_id", "-")].append(body["type"])
    return order


def wait_until(check, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not true after {timeout} s: {what}"
        time.sleep(0.1)


def test_events_reach_a_healthy_endpoint_in_order_signed_while_a_dead_one_fails_apart(
    environment, server, slack
):
    gateway = set_up_gateway(environment, server)
    api, admin = gateway.api, gateway.admin
    assert api.post("/plugins", json={"name": "webhooks"}, headers=admin).status_code == 201
    failing_answers = lambda n: (500, 0.0) if n == 1 else (200, 3.0)  # noqa: E731
    with Receiver() as healthy, Receiver(failing_answers) as failing:
        good = add_endpoint(api, admin, healthy.url)
        bad = add_endpoint(api, admin, failing.url)
        gateway.wait_for_state("connected")
        approved = gateway.open_session("select 1")
        rejected = gateway.open_session("select 2")
        card = card_of(slack, approved)
        gateway.approve(approved)
        refused = api.put(
            f"/reviews/{rejected['review']['id']}",
            json={"status": "REJECTED", "rejection_reason": "not today"},
            headers=gateway.reviewer,
        )
        assert refused.status_code == 200
        revoked = api.put(
            f"/reviews/{approved['review']['id']}",
            json={"status": "REVOKED"},
            headers=gateway.requester,
        )
        assert revoked.status_code == 200

        expected = {
            approved["review"]["id"]: ["review.created", "review.approved", "review.revoked"],
            rejected["review"]["id"]: ["review.created", "review.rejected"],
        }
        wait_for_text(slack, CHANNEL, card.ts, "REVOKED")
        wait_until(
            lambda: events_by_review(healthy.snapshot()) == expected,
            what=f"the healthy endpoint got {events_by_review(healthy.snapshot())}",
        )
        # Cards and the healthy endpoint are done while the dead one is still failing its way
        # through its first deliveries: it held back nobody.
        pending = api.get(
            "/webhooks/deliveries",
            params={"endpoint": bad["id"], "status": "pending"},
            headers=admin,
        ).json()["items"]
        assert pending, "the dead endpoint's deliveries were still being tried"
        received = healthy.snapshot()
        ids = Counter(message.headers["webhook-id"] for message in received)
        assert set(ids.values()) == {1}, "each event once at a healthy endpoint"
        for message in received:
            payload = Webhook(good["secret"]).verify(message.body, message.headers)
            assert payload["data"]["version"] == 1
            assert "script" not in payload["data"]
        rejection = next(
            json.loads(m.body) for m in received if json.loads(m.body)["type"] == "review.rejected"
        )
        assert rejection["data"]["rejection_reason"] == "not today"
        assert rejection["data"]["actor"]["name"] == "Dan Reviewer"

        def failed_deliveries() -> list[dict]:
            return api.get(
                "/webhooks/deliveries",
                params={"endpoint": bad["id"], "status": "failed"},
                headers=admin,
            ).json()["items"]

        wait_until(lambda: len(failed_deliveries()) >= 1, what="the dead endpoint never failed")
        first = failed_deliveries()[-1]
        assert first["attempts"] == 3
        assert first["last_status_code"] in (None, 500)
        attempts = [m for m in failing.snapshot() if m.headers["webhook-id"] == first["message_id"]]
        assert len(attempts) == 3, "the same webhook-id on every attempt"
        assert Webhook(bad["secret"]).verify(attempts[0].body, attempts[0].headers)
    gateway.api.close()


def test_a_restart_mid_delivery_loses_nothing(environment, slack, tmp_path):
    # The receiver holds each request 1.5 s: the server is killed with deliveries in flight.
    with Receiver(lambda _n: (200, 1.5)) as slow:
        port = free_port()
        with server_process(environment, port, tmp_path / "first.log") as first:
            gateway = set_up_gateway(environment, first.url)
            api, admin = gateway.api, gateway.admin
            api.post("/plugins", json={"name": "webhooks"}, headers=admin)
            add_endpoint(api, admin, slow.url)
            sessions = [gateway.open_session(f"select {n}") for n in range(3)]
            wait_until(lambda: slow.snapshot(), what="no delivery started")
            first.kill()  # SIGKILL: no lease given back, answers lost
            gateway.api.close()
        with server_process(environment, port, tmp_path / "second.log"):
            wanted = {f"review.created:{s['review']['id']}" for s in sessions}

            def got() -> set[str]:
                return {
                    f"{json.loads(m.body)['type']}:{json.loads(m.body)['data']['review_id']}"
                    for m in slow.snapshot()
                }

            wait_until(lambda: got() == wanted, timeout=30, what=f"received {got()}")
    by_id: dict[str, set[str]] = defaultdict(set)
    for message in slow.snapshot():
        by_id[message.headers["webhook-id"]].add(message.body)
    assert all(len(bodies) == 1 for bodies in by_id.values()), "a retry sends the same body"
