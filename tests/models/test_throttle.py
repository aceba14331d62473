"""Throttles on failed attempts: shared by replicas through the database, by the clock."""

import pytest
from sqlmodel import select

from models.core import errors
from models.core.db import db_scope
from models.core.throttle import (
    CHAT_LINK_CODES,
    SIDECAR_TOKENS,
    Throttle,
    ThrottleCounter,
    prune_throttle_counters,
)
from tests.factories import ManualClock

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000.0)


def test_failures_on_two_replicas_count_together(engine, clock):
    replicas = [Throttle(engine, clock=clock), Throttle(engine, clock=clock)]
    for attempt in range(30):  # 30 refused tokens allowed per address and minute
        replicas[attempt % 2].record_failure(SIDECAR_TOKENS, address="203.0.113.9")

    with pytest.raises(errors.TooManyAttempts) as refused:
        replicas[0].record_failure(SIDECAR_TOKENS, address="203.0.113.9")

    assert refused.value.retry_after == 60
    assert refused.value.message == "too many refused sidecar tokens; try again in 60 s"
    with pytest.raises(errors.TooManyAttempts):  # remembered: no database read needed
        replicas[0].refuse_if_blocked(SIDECAR_TOKENS, address="203.0.113.9")
    replicas[1].refuse_if_blocked(SIDECAR_TOKENS, address="198.51.100.1")  # others go on


def test_a_principal_is_throttled_whatever_the_addresses(engine, clock):
    throttle = Throttle(engine, clock=clock)
    for attempt in range(5):
        throttle.record_failure(CHAT_LINK_CODES, address=f"10.0.0.{attempt}", principal="u1")

    with pytest.raises(errors.TooManyAttempts):
        throttle.refuse_if_blocked(CHAT_LINK_CODES, address="10.0.0.99", principal="u1")
    throttle.refuse_if_blocked(CHAT_LINK_CODES, address="10.0.0.99", principal="u2")


def test_guessable_codes_ask_the_database_so_another_replica_is_refused_too(engine, clock):
    first, second = Throttle(engine, clock=clock), Throttle(engine, clock=clock)
    for _ in range(5):
        first.record_failure(CHAT_LINK_CODES, address="10.0.0.1", principal="u1")

    with pytest.raises(errors.TooManyAttempts) as refused:
        second.refuse_if_blocked(CHAT_LINK_CODES, address="10.0.0.2", principal="u1")

    assert refused.value.retry_after == 600


def test_the_window_ends_and_ended_windows_are_pruned(engine, clock):
    throttle = Throttle(engine, clock=clock)
    for _ in range(5):
        throttle.record_failure(CHAT_LINK_CODES, address="10.0.0.1", principal="u1")

    clock.now += 601
    throttle.refuse_if_blocked(CHAT_LINK_CODES, address="10.0.0.1", principal="u1")
    throttle.record_failure(CHAT_LINK_CODES, address="10.0.0.1", principal="u1")  # counts anew

    assert prune_throttle_counters(engine, now=clock.now) == 0  # both windows just restarted
    assert prune_throttle_counters(engine, now=clock.now + 601) == 2
    with db_scope(engine) as db:
        assert db.exec(select(ThrottleCounter)).all() == []
