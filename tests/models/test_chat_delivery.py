"""Outbox leases and posted messages: what keeps cards from being lost or posted twice."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlmodel import select

from models.chat.messages import (
    CARD_KINDS,
    DIRECT_MESSAGE_KINDS,
    ChatMessage,
    ChatMessageKind,
    card_channels,
    card_key,
    delivered_keys,
    remember_message,
)
from models.connections.schema import ConnectionCreate
from models.connections.service import create_connection
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.sealing import SecretBox
from models.delivery.leases import lease_deliverable_events, mark_delivered, postpone, renew_lease
from models.delivery.outbox import OutboxEvent, on_committed_events
from models.plugins.schema import PluginConnectionIn, PluginCreate, PluginName
from models.plugins.service import create_plugin
from models.reviews.machine import Decision
from models.reviews.schema import ReviewDecisionRequest
from models.reviews.service import update_review
from models.rules.schema import AccessRequestRuleIn
from models.rules.service import create_rule
from models.sessions.schema import SessionCreate
from models.sessions.service import open_session
from models.users.service import upsert_user

LEASE = timedelta(seconds=60)

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def open_reviews(engine, count: int) -> list:
    """``count`` pending reviews on connection ``db``; returns their ids and the people."""
    with db_scope(engine) as db:
        admin = upsert_user(db=db, sub="admin", groups=["admin"])
        owner = upsert_user(db=db, sub="owner", groups=["dev"])
        reviewer = upsert_user(db=db, sub="reviewer", groups=["dba"])
        create_connection(db=db, actor=admin, request=ConnectionCreate(name="db", type="database"))
        create_rule(
            db=db,
            actor=admin,
            request=AccessRequestRuleIn(name="all", connections=["db"], approval_groups=["dba"]),
        )
        review_ids = [
            open_session(
                db=db, owner=owner, request=SessionCreate(connection="db"), now=utc_now()
            ).review.id  # type: ignore[union-attr]
            for _ in range(count)
        ]
    return [review_ids, admin, reviewer]


def lease(engine, *, now=None, limit=100, kinds=CARD_KINDS):
    with db_scope(engine) as db:
        return lease_deliverable_events(
            db=db, now=now or utc_now(), limit=limit, kinds=kinds, lease=LEASE
        )


def approve(engine, review_id, reviewer) -> None:
    with db_scope(engine) as db:
        update_review(
            db=db,
            review_ref=str(review_id),
            actor=reviewer,
            request=ReviewDecisionRequest(status=Decision.APPROVED),
            now=utc_now(),
        )


def test_events_of_one_review_are_offered_one_at_a_time_oldest_first(engine):
    (review_id, *_), _admin, reviewer = open_reviews(engine, 1)
    approve(engine, review_id, reviewer)

    first = lease(engine)
    assert [e.kind for e in first] == ["review.created"]
    assert lease(engine) == [], "the update waits while the card is being posted"
    with db_scope(engine) as db:
        mark_delivered(db=db, event=first[0], now=utc_now())

    second = lease(engine)
    assert [e.kind for e in second] == ["review.updated"]
    assert second[0].payload["status"] == "APPROVED"


def test_direct_messages_go_in_their_own_lane_and_never_hold_back_cards(engine):
    (review_id, _), admin, reviewer = open_reviews(engine, 2)
    created = lease(engine)
    with db_scope(engine) as db:
        for event in created:
            mark_delivered(db=db, event=event, now=utc_now())
    approve(engine, review_id, reviewer)
    (approved,) = lease(engine)
    with db_scope(engine) as db:
        mark_delivered(
            db=db,
            event=approved,
            now=utc_now(),
            direct_message=(review_id, "APPROVED"),
        )

    (direct,) = lease(engine, kinds=DIRECT_MESSAGE_KINDS)
    assert (direct.kind, direct.review_id, direct.payload["status"]) == (
        "chat.direct_message",
        review_id,
        "APPROVED",
    )
    # The DM is leased and waiting; the review's next card event is not held back by it.
    with db_scope(engine) as db:
        update_review(
            db=db,
            review_ref=str(review_id),
            actor=admin,
            request=ReviewDecisionRequest(status=Decision.REVOKED),
            now=utc_now(),
        )
    assert [e.payload["status"] for e in lease(engine)] == ["REVOKED"]
    assert lease(engine, kinds=DIRECT_MESSAGE_KINDS) == []


def test_a_leased_event_is_not_offered_again_until_its_lease_runs_out(engine):
    review_ids, *_ = open_reviews(engine, 3)

    taken = lease(engine)

    assert {e.review_id for e in taken} == set(review_ids)
    assert lease(engine) == [], "leased events are someone's to deliver"
    again = lease(engine, now=utc_now() + LEASE + timedelta(seconds=1))
    assert {e.id for e in again} == {e.id for e in taken}, "a crashed deliverer's lease ends"


def test_two_deliverers_leasing_at_once_share_the_events_without_overlap(engine):
    review_ids, *_ = open_reviews(engine, 40)
    start = threading.Barrier(2)

    def deliverer(_):
        start.wait()
        return [event.id for event in lease(engine, limit=40)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(deliverer, range(2))

    assert set(first).isdisjoint(second)
    assert len(first) + len(second) == len(review_ids)


def test_a_postponed_event_waits_for_its_backoff_and_counts_the_attempt(engine):
    open_reviews(engine, 1)
    (event,) = lease(engine)
    with db_scope(engine) as db:
        postpone(
            db=db,
            event=event,
            now=utc_now(),
            delay=timedelta(seconds=30),
            error="SlackApiError: ratelimited",
        )

    assert lease(engine) == []
    (retried,) = lease(engine, now=utc_now() + timedelta(seconds=31))
    assert (retried.id, retried.attempts) == (event.id, 1)
    with db_scope(engine) as db:
        row = db.get_one(OutboxEvent, event.id)
        assert row.last_error == "SlackApiError: ratelimited"
        assert row.delivered_at is None


def remember_card(engine, review_id, ts: str, channel: str = "C0DBA") -> bool:
    """What a deliverer does once Slack answered its post of the review's card."""
    with db_scope(engine) as db:
        return remember_message(
            db=db,
            delivery_key=card_key(review_id, channel),
            review_id=review_id,
            kind=ChatMessageKind.CARD,
            channel=channel,
            ts=ts,
            now=utc_now(),
        )


def test_a_message_is_remembered_once_by_its_delivery_key(engine):
    (review_id,), *_ = open_reviews(engine, 1)
    key = card_key(review_id, "C0DBA")

    assert remember_card(engine, review_id, "1700000000.000100")
    # The same card found again (a takeover that adopted it) is no surplus; another one is.
    assert remember_card(engine, review_id, "1700000000.000100")
    assert not remember_card(engine, review_id, "1700000000.000200")

    with db_scope(engine) as db:
        assert delivered_keys(db=db, keys=[key, card_key(review_id, "C0X")]) == {key}
        (message,) = db.exec(select(ChatMessage)).all()
        assert message.ts == "1700000000.000100", "the first card stays the card"


def test_cards_go_to_the_connections_channels_and_the_default_channel(engine):
    (review_id,), admin, _reviewer = open_reviews(engine, 1)
    with db_scope(engine) as db:
        create_plugin(
            db=db,
            actor=admin,
            request=PluginCreate(
                name=PluginName.CHAT,
                connections=[PluginConnectionIn(name="db", config=["C0DBA", "C0OPS"])],
            ),
            secret_box=SecretBox(b"k" * 32),
        )

    with db_scope(engine) as db:
        assert card_channels(db=db, review_id=review_id, default_channel="C0ALL") == [
            "C0DBA",
            "C0OPS",
            "C0ALL",
        ]
        assert card_channels(db=db, review_id=review_id, default_channel="C0DBA") == [
            "C0DBA",
            "C0OPS",
        ]


def test_committed_events_wake_listeners_and_rolled_back_ones_do_not(engine):
    woken = []
    remove = on_committed_events(lambda: woken.append(1))
    try:
        review_ids, _admin, reviewer = open_reviews(engine, 2)
        woken_by_setup = len(woken)
        assert woken_by_setup >= 1
        with db_scope(engine) as db:
            outsider = upsert_user(db=db, sub="outsider", groups=["qa"])
        with pytest.raises(errors.NotAReviewer):
            approve(engine, review_ids[0], outsider)
        assert len(woken) == woken_by_setup, "a refused decision writes no event"
        approve(engine, review_ids[0], reviewer)
        assert len(woken) == woken_by_setup + 1
    finally:
        remove()


def test_a_deliverer_does_not_lease_again_what_it_is_still_working_on(engine):
    open_reviews(engine, 2)
    first, second = lease(engine)
    later = utc_now() + LEASE + timedelta(seconds=1)  # both leases ran out

    with db_scope(engine) as db:
        again = lease_deliverable_events(
            db=db, now=later, limit=10, kinds=CARD_KINDS, lease=LEASE, working_on=[first.id]
        )

    assert [event.id for event in again] == [second.id], "its own event keeps its token"
    with db_scope(engine) as db:
        assert renew_lease(db=db, event=first, now=later, lease=LEASE), "nobody took it over"
        assert not renew_lease(db=db, event=second, now=later, lease=LEASE), "taken over"
