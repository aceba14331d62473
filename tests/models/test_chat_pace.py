"""Slack's pace as the cluster's schedule: turns booked at once by many deliverers are distinct
and one interval apart, far turns send the message back in line, and a 429 holds everyone."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from models.chat.pace import (
    ANSWER_POLL_SECONDS,
    book_turn,
    hold_turns,
    record_answer,
    start_call,
    wait_time,
)
from models.core.db import db_scope

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

NOW = 1_800_000_000.0  # seconds since the epoch; the schedule is wall-clock time
INTERVAL = 1.0


def book(engine, key="C0DBA", now=NOW, horizon=60.0):
    with db_scope(engine) as db:
        return book_turn(db=db, key=key, now=now, interval=INTERVAL, horizon=horizon)


def test_deliverers_booking_at_once_get_turns_one_interval_apart(engine):
    start = threading.Barrier(8)

    def deliverer(_: int) -> float:
        start.wait()
        turn = book(engine)
        assert turn.booked
        return turn.wait

    with ThreadPoolExecutor(8) as pool:
        waits = sorted(pool.map(deliverer, range(8)))

    assert waits == [float(n) for n in range(8)], "one turn each, none shared"
    assert book(engine, key="C0OTHER").wait == 0.0, "channels do not wait for each other"


def test_a_turn_beyond_the_horizon_is_not_booked_but_gives_a_place_in_line(engine):
    for _ in range(5):
        assert book(engine, horizon=4.0).booked
    # The channel's next turn is 5 s away: beyond the horizon, nothing is booked.
    later = [book(engine, horizon=4.0) for _ in range(3)]

    assert [turn.booked for turn in later] == [False, False, False]
    # Each comes back when the queue has room, one interval after the one before it.
    assert [turn.wait for turn in later] == [1.0, 2.0, 3.0]
    assert book(engine, now=NOW + 1.0, horizon=4.0).booked, "back in time, it gets its turn"


def test_a_rate_limit_holds_every_deliverer_until_it_ends(engine):
    with db_scope(engine) as db:
        hold_turns(db=db, key="method:chat.update", until=NOW + 30)
        assert wait_time(db=db, key="method:chat.update", now=NOW) == 30.0
        assert wait_time(db=db, key="method:chat.update", now=NOW + 31) == 0.0
        hold_turns(db=db, key="C0DBA", until=NOW + 10)

    assert book(engine).wait == 10.0, "no turn before Slack's Retry-After ends"
    assert book(engine).wait == 11.0


def test_a_call_starts_only_an_interval_after_the_previous_one_was_answered(engine):
    book(engine)  # the key exists once a turn was booked

    def start(now: float) -> float:
        with db_scope(engine) as db:
            return start_call(db=db, key="C0DBA", now=now, interval=INTERVAL, abandoned_after=15)

    assert start(NOW) == 0.0
    # Another replica's turn came while that call was on its way: it waits for the answer.
    assert start(NOW + 1.5) == ANSWER_POLL_SECONDS
    with db_scope(engine) as db:
        record_answer(db=db, key="C0DBA", at=NOW + 1.6)  # Slack answered late
    assert start(NOW + 2.0) == pytest.approx(0.6), "an interval after the answer"
    assert start(NOW + 2.6) == 0.0
    # A caller that died mid-call holds the key until its call counts as abandoned.
    assert start(NOW + 10) == ANSWER_POLL_SECONDS
    assert start(NOW + 2.6 + 15) == 0.0
