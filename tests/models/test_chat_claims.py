"""Claims on a message's delivery key: one poster in the whole cluster, whoever asks at once,
and only while the deliverer still holds the event's lease."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from models.chat.messages import (
    CARD_KINDS,
    CLAIM_ABANDONED_AFTER,
    Claim,
    card_key,
    claim_delivery,
    release_claim,
)
from models.core.clock import utc_now
from models.core.db import db_scope
from models.delivery.leases import LeasedEvent, lease_deliverable_events
from tests.models.test_chat_delivery import LEASE, lease, open_reviews, remember_card

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

# Long enough for every claim a test makes, however far ahead of the clock it looks.
LONG_LEASE = CLAIM_ABANDONED_AFTER * 10


@pytest.fixture
def event(engine) -> LeasedEvent:
    """A review's event, leased by the deliverer whose claims the tests make."""
    open_reviews(engine, 1)
    with db_scope(engine) as db:
        (leased,) = lease_deliverable_events(
            db=db, now=utc_now(), limit=1, kinds=CARD_KINDS, lease=LONG_LEASE
        )
    return leased


def claim(engine, key: str, event: LeasedEvent, now=None) -> Claim:
    with db_scope(engine) as db:
        return claim_delivery(db=db, delivery_key=key, event=event, now=now or utc_now()).claim


def test_deliverers_asking_at_once_get_one_claim(engine, event):
    key = "card:one-review:C0DBA"
    barrier = threading.Barrier(8)

    def ask(_: int) -> Claim:
        barrier.wait()
        return claim(engine, key, event)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))

    assert sorted(answers) == sorted([Claim.CLAIMED] + [Claim.BUSY] * 7)


def test_a_posted_message_is_never_claimed_again(engine, event):
    review_id = event.review_id
    key = card_key(review_id, "C0DBA")
    assert claim(engine, key, event) is Claim.CLAIMED

    assert remember_card(engine, review_id, "1.000100")

    assert claim(engine, key, event) is Claim.POSTED
    later = utc_now() + CLAIM_ABANDONED_AFTER * 2
    assert claim(engine, key, event, now=later) is Claim.POSTED


def test_a_refused_post_gives_the_claim_back(engine, event):
    key = "direct:42"
    assert claim(engine, key, event) is Claim.CLAIMED
    assert claim(engine, key, event) is Claim.BUSY

    with db_scope(engine) as db:
        release_claim(db=db, delivery_key=key)

    assert claim(engine, key, event) is Claim.CLAIMED


def test_a_post_without_answer_is_looked_for_by_the_next_attempt(engine, event):
    key = "card:unanswered:C0DBA"
    claimed_at = utc_now()
    assert claim(engine, key, event, now=claimed_at) is Claim.CLAIMED

    with db_scope(engine) as db:
        release_claim(db=db, delivery_key=key, uncertain=True)
        again = claim_delivery(db=db, delivery_key=key, event=event, now=utc_now())

    assert again.claim is Claim.RECHECK, "Slack may have posted it: look before posting"
    assert again.since == claimed_at, "where in the channel's history to look from"
    assert claim(engine, key, event) is Claim.BUSY, "the one looking holds the claim"


def test_a_claim_abandoned_by_a_dead_deliverer_is_taken_over_once(engine, event):
    key = "card:crashed:C0DBA"
    claimed_at = utc_now()
    assert claim(engine, key, event, now=claimed_at) is Claim.CLAIMED

    still_fresh = claimed_at + CLAIM_ABANDONED_AFTER - timedelta(seconds=1)
    assert claim(engine, key, event, now=still_fresh) is Claim.BUSY
    abandoned = claimed_at + CLAIM_ABANDONED_AFTER + timedelta(seconds=1)
    assert claim(engine, key, event, now=abandoned) is Claim.RECHECK, "it may have posted"
    assert claim(engine, key, event, now=abandoned) is Claim.BUSY, "the new holder keeps it"


def test_a_deliverer_whose_lease_was_taken_over_cannot_claim(engine):
    open_reviews(engine, 1)
    (first,) = lease(engine)  # a deliverer that then stalls past its lease
    (second,) = lease(engine, now=utc_now() + LEASE + timedelta(seconds=1))
    key = card_key(first.review_id, "C0DBA")

    assert second.id == first.id
    assert second.lease_token != first.lease_token
    assert claim(engine, key, first) is Claim.LEASE_LOST, "it stops before calling Slack"
    assert claim(engine, key, second) is Claim.CLAIMED
