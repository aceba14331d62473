"""Throttles on guessing: too many failed attempts from one address or at one principal get 429.

The counting rules are the ``limits`` library's fixed windows; the counters live in the
database (``throttle_counter``), so every replica sees the same ones and an attacker gains
nothing by spreading attempts over replicas.

Only failures are counted, so people and sidecars using valid credentials never spend from the
budget. For credentials nobody can guess (signed tokens, 256-bit sidecar tokens) a replica
refuses an address or principal it saw go over the limit without asking the database again,
which keeps the database out of every valid request. For short one-time codes, which could be
guessed, every attempt asks the database first.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerMinute
from limits.storage import Storage
from limits.strategies import FixedWindowRateLimiter
from sqlalchemy import Engine, Float, Integer, String, case, delete
from sqlmodel import Field, SQLModel, col

from models.core import errors
from models.core.db import conflict_aware_insert, db_scope, write_transaction

MAX_REMEMBERED_BLOCKS = 10_000


def _now() -> float:
    return time.time()  # looked up at each call, so a test's frozen clock applies


class ThrottleCounter(SQLModel, table=True):
    """One fixed window of failed attempts for one key."""

    __tablename__ = "throttle_counter"

    key: str = Field(sa_type=String(200), primary_key=True)
    count: int = Field(sa_type=Integer)
    expires_at: float = Field(sa_type=Float, index=True)
    """Epoch seconds at which this window ends and the count starts again from zero."""


@dataclass(frozen=True)
class Rule:
    """How many failures of one kind are allowed per client address and per principal."""

    name: str
    what: str
    """Named in the refusal, e.g. "failed sign-ins"."""
    per_address: RateLimitItem
    per_principal: RateLimitItem | None = None
    guessable: bool = False
    """Ask the database before every attempt, not only after a failure."""


BEARER_TOKENS = Rule("bearer", "refused tokens", RateLimitItemPerMinute(30))
SIGN_INS = Rule("sign-in", "failed sign-ins", RateLimitItemPerMinute(20))
SIDECAR_TOKENS = Rule(
    "sidecar",
    "refused sidecar tokens",
    per_address=RateLimitItemPerMinute(30),
    per_principal=RateLimitItemPerMinute(60),
)
CHAT_LINK_CODES = Rule(
    "chat-link",
    "wrong link codes",
    per_address=RateLimitItemPerMinute(20, 10),
    per_principal=RateLimitItemPerMinute(5, 10),
    guessable=True,
)


class DatabaseStorage(Storage):
    """The ``limits`` storage interface on the service's own database: shared by replicas."""

    STORAGE_SCHEME = ["accessgate"]  # noqa: RUF012 - as the base class declares it

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = _now) -> None:
        super().__init__()
        self._engine = engine
        self._clock = clock

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return Exception

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Count ``amount`` more in ``key``'s window, starting a new one if it ended; one row."""
        now = self._clock()
        table = ThrottleCounter.__table__  # type: ignore[attr-defined]
        with db_scope(self._engine) as db, write_transaction(db):
            insert = conflict_aware_insert(db, table).values(
                key=key, count=amount, expires_at=now + expiry
            )
            ended = table.c.expires_at <= now
            upsert = insert.on_conflict_do_update(
                index_elements=["key"],
                set_={
                    "count": case((ended, amount), else_=table.c.count + amount),
                    "expires_at": case((ended, now + expiry), else_=table.c.expires_at),
                },
            ).returning(table.c.count)
            count: int = db.connection().execute(upsert).scalar_one()
        return count

    def get(self, key: str) -> int:
        with db_scope(self._engine) as db:
            row = db.get(ThrottleCounter, key)
        return row.count if row is not None and row.expires_at > self._clock() else 0

    def get_expiry(self, key: str) -> float:
        with db_scope(self._engine) as db:
            row = db.get(ThrottleCounter, key)
        return row.expires_at if row is not None else self._clock()

    def check(self) -> bool:
        return True

    def reset(self) -> int | None:
        with db_scope(self._engine) as db, write_transaction(db):
            db.exec(delete(ThrottleCounter))
        return None

    def clear(self, key: str) -> None:
        with db_scope(self._engine) as db, write_transaction(db):
            db.exec(delete(ThrottleCounter).where(col(ThrottleCounter.key) == key))


class Throttle:
    """Counts failures per rule, address and principal; refuses with TooManyAttempts."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = _now) -> None:
        self._clock = clock
        self._limiter = FixedWindowRateLimiter(DatabaseStorage(engine, clock=clock))
        self._blocked_until: dict[str, float] = {}

    def refuse_if_blocked(self, rule: Rule, *, address: str, principal: str | None = None) -> None:
        """TooManyAttempts if the address or principal used up the rule's failures."""
        for limit, key in self._limits(rule, address, principal):
            until = self._blocked_until.get(key)
            if until is not None and until > self._clock():
                raise self._refusal(rule, until)
            if rule.guessable and not self._limiter.test(limit, key):
                raise self._refusal(rule, self._remember(limit, key))

    def record_failure(self, rule: Rule, *, address: str, principal: str | None = None) -> None:
        """Count a failed attempt; TooManyAttempts if it used up the rule's failures."""
        over = [
            (limit, key)
            for limit, key in self._limits(rule, address, principal)
            if not self._limiter.hit(limit, key)
        ]
        if over:
            raise self._refusal(rule, max(self._remember(limit, key) for limit, key in over))

    def forget(self) -> None:
        """Forget what this replica remembered (the database's counters stay)."""
        self._blocked_until.clear()

    def _limits(
        self, rule: Rule, address: str, principal: str | None
    ) -> list[tuple[RateLimitItem, str]]:
        limits = [(rule.per_address, f"{rule.name}:address:{address}")]
        if rule.per_principal is not None and principal:
            limits.append((rule.per_principal, f"{rule.name}:principal:{principal}"))
        return limits

    def _remember(self, limit: RateLimitItem, key: str) -> float:
        until = self._limiter.get_window_stats(limit, key).reset_time
        if len(self._blocked_until) >= MAX_REMEMBERED_BLOCKS:
            self._blocked_until.clear()
        self._blocked_until[key] = until
        return until

    def _refusal(self, rule: Rule, until: float) -> errors.TooManyAttempts:
        retry_after = max(1, math.ceil(until - self._clock()))
        return errors.TooManyAttempts(
            f"too many {rule.what}; try again in {retry_after} s", retry_after=retry_after
        )


def prune_throttle_counters(engine: Engine, *, now: float | None = None) -> int:
    """Delete windows that ended; returns how many."""
    moment = time.time() if now is None else now
    with db_scope(engine) as db, write_transaction(db):
        result = db.exec(delete(ThrottleCounter).where(col(ThrottleCounter.expires_at) <= moment))
    return int(result.rowcount)
