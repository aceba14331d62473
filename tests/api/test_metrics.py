"""GET /metrics: the Prometheus text format, read back with Prometheus' own parser."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import (
    configure_review_groups,
    decide,
    make_connection,
    make_user,
    open_session,
)

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def scrape(client, **headers) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_move_with_a_known_sequence_of_requests(client, engine, admin):
    dev, dba = make_user(engine, "dev", ["dev"]), make_user(engine, "dba", ["dba"])
    make_connection(client, admin)
    configure_review_groups(client, admin, "pg-prod", ["dba"])
    before = scrape(client)

    review = open_session(client, dev)["review"]
    for _ in range(3):
        client.get(f"/api/reviews/{review['id']}", headers=dev.headers)
    decide(client, dba, review["id"], status="APPROVED")
    client.get("/api/reviews/not-a-review", headers=dev.headers)
    after = scrape(client)

    route = "/api/reviews/{review_id}"
    assert (
        value(after, "accessgate_http_requests_total", route=route, method="GET", status="200")
        - value(before, "accessgate_http_requests_total", route=route, method="GET", status="200")
        == 3
    )
    assert (
        value(after, "accessgate_http_requests_total", route=route, method="GET", status="404")
        - value(before, "accessgate_http_requests_total", route=route, method="GET", status="404")
        == 1
    )
    assert (
        value(after, "accessgate_http_request_duration_seconds_count", route=route, method="PUT")
        - value(before, "accessgate_http_request_duration_seconds_count", route=route, method="PUT")
        == 1
    )
    assert (
        value(after, "accessgate_decisions_total", door="api", outcome="APPROVED")
        - value(before, "accessgate_decisions_total", door="api", outcome="APPROVED")
        == 1
    )
    # The review's created and updated events wait for a chat bot this test does not run.
    assert value(after, "accessgate_outbox_backlog", consumer="chat_cards") == 2
    assert value(after, "accessgate_chat_connection_state", state="stopped") == 0
    assert value(after, "accessgate_scheduler_lag_seconds", rule="expiry") == 0


def test_metrics_can_be_kept_behind_a_token(client, settings):
    settings.metrics_token = "scrape-me-please"

    refused = client.get("/metrics")
    allowed = client.get("/metrics", headers={"Authorization": "Bearer scrape-me-please"})

    assert refused.status_code == 401
    assert allowed.status_code == 200
