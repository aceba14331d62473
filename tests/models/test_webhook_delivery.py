"""Webhook delivery rules, on both databases: fan-out, order per review, fencing, retries."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select

from models.core.db import db_scope, write_transaction
from models.users.service import default_organization
from models.webhooks import delivery as deliveries
from models.webhooks.events import publish_event
from models.webhooks.schema import DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookKind

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
SCHEDULE = [timedelta(seconds=5), timedelta(minutes=5)]
LEASE = timedelta(seconds=60)


@pytest.fixture
def organization(engine) -> uuid.UUID:
    with db_scope(engine) as db:
        return default_organization(db).id


def endpoint(engine, organization, *, events=(), created_at=T0) -> uuid.UUID:
    row = WebhookEndpoint(
        organization_id=organization,
        url="http://127.0.0.1:9/hook",
        events=list(events),
        sealed_secret="sealed",
        created_at=created_at,
    )
    with db_scope(engine) as db, write_transaction(db):
        db.add(row)
    return row.id


def publish(engine, organization, kind, review_id=None, at=T0 + timedelta(seconds=1)) -> None:
    with db_scope(engine) as db, write_transaction(db):
        publish_event(
            db,
            kind=kind,
            organization_id=organization,
            now=at,
            review_id=review_id,
            data={"review_id": str(review_id)},
        )


def fan_out(engine, organizations) -> int:
    with db_scope(engine) as db:
        return deliveries.fan_out(db, now=T0 + timedelta(seconds=2), organizations=organizations)


def lease(engine, organization, at=T0 + timedelta(seconds=2)):
    with db_scope(engine) as db:
        return deliveries.lease_due(db, now=at, limit=50, lease=LEASE, organizations=[organization])


def test_events_wait_while_the_plugin_is_off_and_go_to_the_endpoints_that_want_them(
    engine, organization
):
    everything = endpoint(engine, organization)
    approvals_only = endpoint(engine, organization, events=["review.approved"])
    later = endpoint(engine, organization, created_at=T0 + timedelta(hours=1))
    review = uuid.uuid4()
    publish(engine, organization, WebhookKind.REVIEW_CREATED, review)
    publish(engine, organization, WebhookKind.REVIEW_APPROVED, review)

    assert fan_out(engine, []) == 0  # the plugin is not installed: nothing fanned out, kept
    assert fan_out(engine, [organization]) == 2

    with db_scope(engine) as db:
        made = sorted((row.endpoint_id, row.kind) for row in db.exec(select(WebhookDelivery)))
    assert made == sorted(
        [
            (everything, "review.created"),
            (everything, "review.approved"),
            (approvals_only, "review.approved"),
        ]
    )
    assert later not in {endpoint_id for endpoint_id, _ in made}, "no history before it existed"
    assert fan_out(engine, [organization]) == 0, "an event is fanned out once"


def test_a_review_s_deliveries_to_one_endpoint_go_one_after_the_other(engine, organization):
    target = endpoint(engine, organization)
    first, second = uuid.uuid4(), uuid.uuid4()
    publish(engine, organization, WebhookKind.REVIEW_CREATED, first)
    publish(engine, organization, WebhookKind.REVIEW_APPROVED, first)
    publish(engine, organization, WebhookKind.REVIEW_CREATED, second)
    fan_out(engine, [organization])

    leased = lease(engine, organization)

    assert sorted(item.message_id for item in leased) == ["msg_1", "msg_3"]
    assert all(item.endpoint_id == target for item in leased)
    assert lease(engine, organization) == [], "leased already: nobody else takes them"
    with db_scope(engine) as db:
        done = deliveries.record_outcomes(
            db,
            attempts=[deliveries.Attempt(item, 204, None) for item in leased],
            now=T0 + timedelta(seconds=3),
            schedule=SCHEDULE,
        )
    assert done == ["delivered", "delivered"]
    assert [item.message_id for item in lease(engine, organization)] == ["msg_2"]


def test_failed_attempts_wait_their_schedule_then_the_delivery_fails(engine, organization):
    endpoint(engine, organization)
    publish(engine, organization, WebhookKind.REVIEW_CREATED, uuid.uuid4())
    fan_out(engine, [organization])
    moment = T0 + timedelta(seconds=2)
    statuses = []
    for _ in range(3):
        [item] = lease(engine, organization, at=moment)
        with db_scope(engine) as db:
            [status] = deliveries.record_outcomes(
                db,
                attempts=[deliveries.Attempt(item, 500, None)],
                now=moment,
                schedule=SCHEDULE,
            )
        statuses.append(status)
        assert lease(engine, organization, at=moment) == [], "not before its next attempt"
        moment += timedelta(minutes=6)

    assert statuses == ["pending", "pending", "failed"]
    with db_scope(engine) as db:
        row = db.exec(select(WebhookDelivery)).one()
    assert (row.status, row.attempts, row.last_status_code) == (DeliveryStatus.FAILED, 3, 500)


def test_an_attempt_recorded_with_a_lost_lease_changes_nothing(engine, organization):
    endpoint(engine, organization)
    publish(engine, organization, WebhookKind.REVIEW_CREATED, uuid.uuid4())
    fan_out(engine, [organization])
    [stale] = lease(engine, organization)
    [current] = lease(engine, organization, at=T0 + timedelta(minutes=5))  # the lease ran out

    with db_scope(engine) as db:
        outcome = deliveries.record_outcomes(
            db, attempts=[deliveries.Attempt(stale, 204, None)], now=T0, schedule=SCHEDULE
        )

    assert outcome == [None]
    assert current.lease_token != stale.lease_token
    with db_scope(engine) as db:
        assert db.exec(select(WebhookDelivery.status)).one() == DeliveryStatus.PENDING
