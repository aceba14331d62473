"""Claims on a message's delivery key: one poster in the whole cluster, whoever asks at once."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from models.chat.messages import (
    CLAIM_ABANDONED_AFTER,
    ChatMessageKind,
    Claim,
    card_key,
    claim_delivery,
    release_claim,
    remember_message,
)
from models.core.clock import utc_now
from models.core.db import db_scope
from tests.models.test_chat_delivery import open_reviews

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def claim(engine, key: str, now=None) -> Claim:
    with db_scope(engine) as db:
        return claim_delivery(db=db, delivery_key=key, now=now or utc_now())


def test_deliverers_asking_at_once_get_one_claim(engine):
    key = "card:one-review:C0DBA"
    barrier = threading.Barrier(8)

    def ask(_: int) -> Claim:
        barrier.wait()
        return claim(engine, key)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))

    assert sorted(answers) == sorted([Claim.CLAIMED] + [Claim.BUSY] * 7)


def test_a_posted_message_is_never_claimed_again(engine):
    [review_id], _admin, _reviewer = open_reviews(engine, 1)
    key = card_key(review_id, "C0DBA")
    assert claim(engine, key) is Claim.CLAIMED

    with db_scope(engine) as db:
        remember_message(
            db=db,
            delivery_key=key,
            review_id=review_id,
            kind=ChatMessageKind.CARD,
            channel="C0DBA",
            ts="1.000100",
            now=utc_now(),
        )

    assert claim(engine, key) is Claim.POSTED
    later = utc_now() + CLAIM_ABANDONED_AFTER * 2
    assert claim(engine, key, now=later) is Claim.POSTED


def test_a_failed_post_gives_the_claim_back(engine):
    key = "direct:42"
    assert claim(engine, key) is Claim.CLAIMED
    assert claim(engine, key) is Claim.BUSY

    with db_scope(engine) as db:
        release_claim(db=db, delivery_key=key)

    assert claim(engine, key) is Claim.CLAIMED


def test_a_claim_abandoned_by_a_dead_deliverer_is_taken_over_once(engine):
    key = "card:crashed:C0DBA"
    claimed_at = utc_now()
    assert claim(engine, key, now=claimed_at) is Claim.CLAIMED

    still_fresh = claimed_at + CLAIM_ABANDONED_AFTER - timedelta(seconds=1)
    assert claim(engine, key, now=still_fresh) is Claim.BUSY
    abandoned = claimed_at + CLAIM_ABANDONED_AFTER + timedelta(seconds=1)
    assert claim(engine, key, now=abandoned) is Claim.CLAIMED
    assert claim(engine, key, now=abandoned) is Claim.BUSY, "the new holder keeps it"
