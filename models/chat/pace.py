"""Slack's pace, kept in the database so that every replica takes its turns from one schedule.

A pace key names what Slack limits: a channel (about one new message a second), a requester's
DM channel, or a Web API method after a 429. Its row holds the earliest moment the next call may
go out (``next_turn``, seconds since the epoch: replicas on different machines share wall-clock
time, not a monotonic clock). Booking a turn moves ``next_turn`` one interval on in one UPDATE,
so two replicas booking at once get two different turns; a 429 anywhere pushes it back for the
whole cluster.

A turn is a booking, and a busy process may send its post late, closer to the next turn
(another replica's) than they were booked. So the poster of a turn also takes the moment of
its call (``start_call``), which it gets only once the key's previous call was answered an
interval ago, whoever made it: like one process posting one message at a time, posts never
reach Slack closer together than the interval, however late each was sent.

Turns are booked at most ``horizon`` ahead: a replica that dies loses at most that much of a
channel's schedule, and a deliverer never waits in memory longer than its lease. A message
whose turn is further away books a place in the key's waiting line instead, which says when to
come back: messages sent away together come back one interval apart, in about the order they
will be posted, rather than all at once.
"""

from dataclasses import dataclass

from sqlalchemy import Float, String, and_, case, or_, update
from sqlmodel import Field, Session, SQLModel, col, select

from models.core.db import insert_unless_present, write_transaction

WAITING_LINE = "#waiting"
ANSWER_POLL_SECONDS = 0.02


class ChatPace(SQLModel, table=True):
    __tablename__ = "chat_pace"

    pace_key: str = Field(sa_type=String(200), primary_key=True)
    next_turn: float = Field(sa_type=Float)  # seconds since the epoch
    # When the key's latest call started, and when the latest answer came, whichever replica
    # made it: a call is on its way while the answer is older than the start.
    call_started: float = Field(
        default=0.0, sa_type=Float, sa_column_kwargs={"server_default": "0"}
    )
    call_answered: float = Field(
        default=0.0, sa_type=Float, sa_column_kwargs={"server_default": "0"}
    )


@dataclass(frozen=True)
class Turn:
    """A turn ``wait`` seconds away: booked, or (not booked) when to come back and book one."""

    booked: bool
    wait: float


def book_turn(*, db: Session, key: str, now: float, interval: float, horizon: float) -> Turn:
    """Book the next turn of ``key`` unless it is more than ``horizon`` seconds away."""
    with write_transaction(db):
        booked = _advance(db, key, now=now, interval=interval, latest=now + horizon)
        if booked is not None:
            return Turn(booked=True, wait=max(booked - now, 0.0))
        queued = db.exec(select(ChatPace.next_turn).where(ChatPace.pace_key == key)).one()
        # Back when the turns booked so far leave room within the horizon, in line.
        place = _advance(db, key + WAITING_LINE, now=queued - horizon, interval=interval)
        assert place is not None
        return Turn(booked=False, wait=max(place - now, 0.0))


def hold_turns(*, db: Session, key: str, until: float) -> None:
    """No turn of ``key`` before ``until`` (Slack asked to wait)."""
    with write_transaction(db):
        _ensure_row(db, key, until)
        db.connection().execute(
            update(ChatPace)
            .where(col(ChatPace.pace_key) == key, col(ChatPace.next_turn) < until)
            .values(next_turn=until)
        )


def start_call(
    *, db: Session, key: str, now: float, interval: float, abandoned_after: float
) -> float:
    """Take the moment ``now`` to call Slack for ``key``, if the key's previous call was
    answered at least ``interval`` ago (or started more than ``abandoned_after`` ago and never
    answered: its caller died); otherwise return the seconds to wait before asking again."""
    previous_done = and_(
        col(ChatPace.call_answered) >= col(ChatPace.call_started),
        col(ChatPace.call_answered) <= now - interval,
    )
    previous_abandoned = col(ChatPace.call_started) <= now - abandoned_after
    with write_transaction(db):
        # Turns are booked at the nominal interval; calls go out a little slower (each waits
        # for the previous answer). The schedule is pushed to where the calls are, so turns
        # booked from now on are not promised earlier than they can come.
        catch_up = case(
            (col(ChatPace.next_turn) < now + interval, now + interval),
            else_=col(ChatPace.next_turn),
        )
        started = db.connection().execute(
            update(ChatPace)
            .where(col(ChatPace.pace_key) == key, or_(previous_done, previous_abandoned))
            .values(call_started=now, next_turn=catch_up)
            .returning(col(ChatPace.pace_key))
        )
        if started.first() is not None:
            return 0.0
        row = db.exec(select(ChatPace).where(ChatPace.pace_key == key)).one()
        if row.call_answered < row.call_started:  # still on its way: look again soon
            return ANSWER_POLL_SECONDS
        return max(row.call_answered + interval - now, 0.001)


def record_answer(*, db: Session, key: str, at: float) -> None:
    """Slack answered the call of ``key`` (or it failed) at ``at``."""
    with write_transaction(db):
        db.connection().execute(
            update(ChatPace)
            .where(col(ChatPace.pace_key) == key, col(ChatPace.call_answered) < at)
            .values(call_answered=at)
        )


def wait_time(*, db: Session, key: str, now: float) -> float:
    """Seconds until ``key``'s next turn (0 when it is free)."""
    queued = db.exec(select(ChatPace.next_turn).where(ChatPace.pace_key == key)).first()
    return 0.0 if queued is None else max(queued - now, 0.0)


def _advance(
    db: Session, key: str, *, now: float, interval: float, latest: float | None = None
) -> float | None:
    """Take ``key``'s next turn (not before ``now``, not after ``latest``); None if too late."""
    _ensure_row(db, key, now)
    turn = case((col(ChatPace.next_turn) < now, now), else_=col(ChatPace.next_turn))
    condition = col(ChatPace.pace_key) == key
    if latest is not None:
        condition = condition & (col(ChatPace.next_turn) <= latest)
    taken = (
        db.connection()
        .execute(
            update(ChatPace)
            .where(condition)
            .values(next_turn=turn + interval)
            .returning(col(ChatPace.next_turn))
        )
        .scalar()
    )
    return None if taken is None else float(taken) - interval


def _ensure_row(db: Session, key: str, now: float) -> None:
    insert_unless_present(db, ChatPace, key="pace_key", pace_key=key, next_turn=now)
