"""Benchmark: the outbox's own queries with a large backlog, on SQLite and PostgreSQL.

Fills the outbox with 100,000 undelivered events (one per review, as a burst of new reviews
leaves them) plus as many delivered ones, then times what deliverers and the pruner do: find
the due events, lease a batch of them, mark one delivered, and prune a batch of delivered
events. These are
database calls, not HTTP requests, so they are timed in process, each repeated and reported as
its median and worst run.

Results go to stdout and bench/results/outbox.md; the goal is 10 ms per call.

Run it with ``make bench`` or ``.venv/bin/python -m bench.outbox``.
"""

import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, insert, text

from bench.harness import closing_lines, postgres_database, run_benchmark
from bot.notifier import LEASE_BATCH
from models.chat.messages import CARD_KINDS
from models.core.clock import utc_now
from models.core.db import WRITE_OPTION, create_db_engine, db_scope, upgrade_database
from models.delivery.leases import (
    deliverable_events_query,
    lease_deliverable_events,
    mark_delivered,
)
from models.delivery.outbox import EventKind, OutboxEvent
from models.delivery.pruning import PRUNE_BATCH, prune_delivered

BACKLOG = 100_000
DELIVERED = 100_000
REPEATS = 25
GOAL_MS = 10.0
LEASE = timedelta(seconds=60)


def main() -> int:
    return run_benchmark("outbox", measure_all, needs_wrk=False)


def measure_all() -> tuple[str, bool]:
    lines = [
        "# Outbox benchmark",
        "",
        f"{BACKLOG:,} undelivered and {DELIVERED:,} delivered events; each call run {REPEATS} "
        f"times: finding the next {LEASE_BATCH} due events (the query alone), leasing them, "
        f"marking one delivered, pruning a batch of {PRUNE_BATCH}.",
        "",
        "| database | call | median ms | max ms |",
        "|---|---|---:|---:|",
    ]
    problems: list[str] = []
    for name, database in (("SQLite", sqlite_database), ("PostgreSQL", postgres_database)):
        with database() as url:
            engine = create_db_engine(url)
            try:
                upgrade_database(engine)
                fill(engine)
                for call, runs in measure(engine).items():
                    median = statistics.median(runs)
                    lines.append(f"| {name} | {call} | {median:.2f} | {max(runs):.2f} |")
                    if median > GOAL_MS:
                        problems.append(f"{name} {call}: median {median:.1f} ms > {GOAL_MS} ms")
            finally:
                engine.dispose()
        print(f"{name} done", flush=True)
    lines += ["", *closing_lines(problems, f"Every median within {GOAL_MS:.0f} ms.")]
    return "\n".join(lines) + "\n", bool(problems)


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="accessgate-bench-outbox-") as tmp:
        yield f"sqlite:///{Path(tmp) / 'accessgate.db'}"


def fill(engine: Engine) -> None:
    """The backlog of a burst: one undelivered review.created per review; and a week of
    delivered events waiting to be pruned."""
    now = utc_now()
    week_ago = now - timedelta(days=8)
    rows = [
        {
            "kind": EventKind.REVIEW_CREATED,
            "review_id": uuid.uuid4(),
            "payload": {"status": "PENDING"},
            "created_at": now,
            "attempts": 0,
            "delivered_at": week_ago if n < DELIVERED else None,
        }
        for n in range(BACKLOG + DELIVERED)
    ]
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        connection.execute(insert(OutboxEvent), rows)
    with engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))


def measure(engine: Engine) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {
        "find due events": [],
        "lease a batch": [],
        "mark delivered": [],
        "prune a batch": [],
    }
    for _ in range(REPEATS):
        with db_scope(engine) as db:
            started = time.perf_counter()
            due = deliverable_events_query(now=utc_now(), limit=LEASE_BATCH, kinds=CARD_KINDS)
            list(db.exec(due))
            db.rollback()
            runs["find due events"].append(elapsed_ms(started))
            started = time.perf_counter()
            leased = lease_deliverable_events(
                db=db, now=utc_now(), limit=LEASE_BATCH, kinds=CARD_KINDS, lease=LEASE
            )
            runs["lease a batch"].append(elapsed_ms(started))
            started = time.perf_counter()
            mark_delivered(db=db, event=leased[0], now=utc_now())
            runs["mark delivered"].append(elapsed_ms(started))
            started = time.perf_counter()
            prune_delivered(db=db, before=utc_now() - timedelta(days=7))
            runs["prune a batch"].append(elapsed_ms(started))
    return runs


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    raise SystemExit(main())
