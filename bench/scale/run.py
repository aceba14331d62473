"""Benchmark: the lists, reads and decisions of a year-old organization, 1,000,000 reviews.

For SQLite and then PostgreSQL: fill a fresh database in bulk (see ``fill``), start
``accessgate serve`` on it as an operator would, and time requests from this process, one at a
time over a kept-alive connection, each kind ``SAMPLES`` times after a warm-up: the admin's first
page, a page 1,000 deep, a reviewer's first and deep page, one review by id, one approval, and
the trivial endpoint for the ratio. The reviewer's waiting list (App Home, ``/accessgate
pending``) and the outbox lease have no HTTP route of their own, so they are timed in process as
the bot runs them.

Results go to stdout and bench/results/scale.md. Goals: every list p50 <= 20 ms and p99 <= 50 ms;
the fill under 3 minutes. Missing a goal is reported (exit 1), as is any request that failed.

Run it with ``make bench-scale`` or ``.venv/bin/python -m bench.scale [reviews]``.
"""

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import col, select

from bench.harness import (
    RESULTS_DIR,
    SECRET_KEY,
    postgres_database,
    run_benchmark,
    running_server,
    seeded_database,
    server_env,
)
from bench.scale.fill import GROUPS, REVIEWS, USERS, Filled, fill, group_name
from bot.blocks import PENDING_LIST_LIMIT
from bot.notifier import LEASE_BATCH
from models.chat.messages import CARD_KINDS
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope
from models.core.settings import Settings, resolve_secret_key
from models.delivery.leases import lease_deliverable_events
from models.reviews.listing import Position, reviews_waiting_on
from models.reviews.schema import Review
from models.reviews.timing import ReviewTiming
from models.scheduler.rules import run_due_rules
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user

SAMPLES = 200
WARMUP = 20
PAGE = 50
DEEP_PAGES = 1_000
LIST_GOAL_P50_MS = 20.0
LIST_GOAL_P99_MS = 50.0
FILL_GOAL_SECONDS = 180.0
REVIEWER_SUB = "bench-scale-reviewer"
REVIEWER_GROUPS = [group_name(0), group_name(1)]


@dataclass
class Timing:
    name: str
    runs_ms: list[float]
    is_list: bool
    how: str = "HTTP"

    @property
    def p50(self) -> float:
        return statistics.median(self.runs_ms)

    @property
    def p99(self) -> float:
        ordered = sorted(self.runs_ms)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


@dataclass
class BackendResult:
    name: str
    fill_seconds: float
    timings: list[Timing] = field(default_factory=list)


def main() -> int:
    reviews = int(sys.argv[1]) if len(sys.argv) > 1 else REVIEWS
    return run_benchmark("scale", lambda: measure_all(reviews), needs_wrk=False)


def measure_all(reviews: int) -> tuple[str, bool]:
    results = [measure_backend("SQLite", "", reviews)]
    with postgres_database() as url:
        results.append(measure_backend("PostgreSQL", url, reviews))
    return render(results, reviews)


def measure_backend(name: str, database_url: str, reviews: int) -> BackendResult:
    with tempfile.TemporaryDirectory(prefix="accessgate-bench-scale-") as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "data", database_url=database_url, secret_key=SECRET_KEY
        )
        db_url = settings.resolved_database_url()
        with seeded_database(db_url) as (db, _admin):
            upsert_user(db=db, sub=REVIEWER_SUB, groups=REVIEWER_GROUPS)
        engine = create_db_engine(db_url)
        try:
            print(f"[{name}] filling {reviews:,} reviews...", flush=True)
            started = time.perf_counter()
            filled = fill(engine, reviews=reviews)
            result = BackendResult(name, time.perf_counter() - started)
            print(f"[{name}] filled in {result.fill_seconds:.0f} s", flush=True)
            key = resolve_secret_key(settings)
            log = RESULTS_DIR / f"server-scale-{name.lower()}.log"
            with running_server(server_env(settings), log) as base_url:
                result.timings += time_http(engine, base_url, key, filled)
            result.timings += time_in_process(engine)
        finally:
            engine.dispose()
    return result


def token_for(key: bytes, sub: str) -> dict[str, str]:
    token = issue_local_token(key=key, sub=sub, now=utc_now(), ttl=timedelta(hours=2))
    return {"Authorization": f"Bearer {token}"}


def time_http(engine: Engine, base_url: str, key: bytes, filled: Filled) -> list[Timing]:
    admin = token_for(key, "bench-admin")
    reviewer = token_for(key, REVIEWER_SUB)
    deep = deep_cursor(engine)
    sample_ids = [
        str(review_id) for review_id, _ in filled.pending[:: max(1, len(filled.pending) // SAMPLES)]
    ]
    to_approve = iter_or_explain(
        str(review_id)
        for review_id, waiting in filled.pending
        if set(waiting) & set(REVIEWER_GROUPS)
    )
    timings = []
    with httpx.Client(base_url=f"{base_url}/api", timeout=30) as api:

        def get(path: str, headers: dict[str, str], **params: Any) -> Callable[[], httpx.Response]:
            return lambda: api.get(path, params=params, headers=headers)

        ids = iter(sample_ids * 2)
        plan: list[tuple[str, Callable[[], httpx.Response], bool]] = [
            ("trivial endpoint: GET /api/healthz", get("/healthz", {}), False),
            ("admin's first page", get("/reviews", admin, limit=PAGE), True),
            (
                f"admin's page {DEEP_PAGES:,} deep",
                get("/reviews", admin, limit=PAGE, cursor=deep),
                True,
            ),
            (
                "admin's first page of PENDING",
                get("/reviews", admin, limit=PAGE, status="PENDING"),
                True,
            ),
            ("reviewer's first page (2 groups)", get("/reviews", reviewer, limit=PAGE), True),
            (
                f"reviewer's page {DEEP_PAGES // 20} deep",
                get("/reviews", reviewer, limit=PAGE, cursor=reviewer_cursor(api, reviewer)),
                True,
            ),
            (
                "reviewer's first page of PENDING",
                get("/reviews", reviewer, limit=PAGE, status="PENDING"),
                True,
            ),
            ("get by id", lambda: api.get(f"/reviews/{next(ids)}", headers=admin), False),
            (
                "one approval: PUT /api/reviews/{id}",
                lambda: api.put(
                    f"/reviews/{next(to_approve)}", json={"status": "APPROVED"}, headers=reviewer
                ),
                False,
            ),
        ]
        for name, call, is_list in plan:
            timings.append(Timing(name, repeat(name, call), is_list))
            print(
                f"  {name}: p50 {timings[-1].p50:.1f} ms, p99 {timings[-1].p99:.1f} ms", flush=True
            )
    return timings


def iter_or_explain(ids: Iterable[str]) -> Iterator[str]:
    yield from ids
    raise RuntimeError("no pending review left for the reviewer to approve; fill more reviews")


def repeat(name: str, call: Callable[[], httpx.Response]) -> list[float]:
    runs = []
    for attempt in range(WARMUP + SAMPLES):
        started = time.perf_counter()
        response = call()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"{name}: {response.status_code} {response.text[:200]}")
        if attempt >= WARMUP:
            runs.append(elapsed)
    return runs


def deep_cursor(engine: Engine) -> str:
    """The cursor the admin's walk holds after ``DEEP_PAGES`` pages (found once, by offset)."""
    with db_scope(engine) as db:
        review = db.exec(
            select(Review)
            .order_by(col(Review.created_at).desc(), col(Review.id).desc())
            .offset(DEEP_PAGES * PAGE - 1)
            .limit(1)
        ).one()
    return Position(review.created_at, review.id).encode()


def reviewer_cursor(api: httpx.Client, headers: dict[str, str]) -> str:
    """Walk the reviewer's pages to a depth they might reach, as a client would."""
    cursor: str | None = None
    for _ in range(DEEP_PAGES // 20):
        params: dict[str, Any] = {"limit": PAGE}
        if cursor:
            params["cursor"] = cursor
        cursor = api.get("/reviews", params=params, headers=headers).json()["next_cursor"]
    if cursor is None:
        raise RuntimeError("the reviewer's walk ended early; fill more reviews")
    return cursor


SCHEDULE = ReviewTiming(
    expires_after=timedelta(hours=24), remind_after=timedelta(minutes=30), reminders=3
)


def time_in_process(engine: Engine) -> list[Timing]:
    with db_scope(engine) as db:
        reviewer = upsert_user(db=db, sub=REVIEWER_SUB, groups=REVIEWER_GROUPS)
    waiting: list[float] = []
    leasing: list[float] = []
    looking: list[float] = []
    for attempt in range(WARMUP + SAMPLES):
        with db_scope(engine) as db:
            started = time.perf_counter()
            reviews_waiting_on(db=db, reviewer=reviewer, limit=PENDING_LIST_LIMIT + 1)
            waited = (time.perf_counter() - started) * 1000
            db.rollback()
            started = time.perf_counter()
            lease_deliverable_events(
                db=db,
                now=utc_now(),
                limit=LEASE_BATCH,
                kinds=CARD_KINDS,
                lease=timedelta(seconds=60),
            )
            leased = (time.perf_counter() - started) * 1000
            db.rollback()
            # What every replica does every few seconds: look for expiries, reminders, digests
            # and ended access that are due (none are in the filled data: the idle look).
            started = time.perf_counter()
            run_due_rules(db, now=utc_now(), timing=SCHEDULE)
            looked = (time.perf_counter() - started) * 1000
        if attempt >= WARMUP:
            waiting.append(waited)
            leasing.append(leased)
            looking.append(looked)
    return [
        Timing("reviewer's waiting list (App Home)", waiting, True, how="in process"),
        Timing(
            f"outbox lease of {LEASE_BATCH} (100,000 undelivered)", leasing, False, how="in process"
        ),
        Timing("scheduler's look, nothing due (4 rules)", looking, False, how="in process"),
    ]


def render(results: list[BackendResult], reviews: int) -> tuple[str, bool]:
    lines = [
        "# Scale benchmark",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {reviews:,} reviews of {USERS:,} "
        f"users in {GROUPS} reviewer groups (5% PENDING), pages of {PAGE}; each request "
        f"{SAMPLES} times after {WARMUP} warm-ups, one at a time.",
        "",
        "| database | what | how | p50 ms | p99 ms | p50 / trivial p50 |",
        "|---|---|---|---:|---:|---:|",
    ]
    problems = []
    for result in results:
        trivial = result.timings[0].p50
        for timing in result.timings:
            lines.append(
                f"| {result.name} | {timing.name} | {timing.how} | {timing.p50:.1f} | "
                f"{timing.p99:.1f} | {timing.p50 / trivial:.1f} |"
            )
            if timing.is_list and (timing.p50 > LIST_GOAL_P50_MS or timing.p99 > LIST_GOAL_P99_MS):
                problems.append(
                    f"{result.name} {timing.name}: p50 {timing.p50:.1f} / p99 {timing.p99:.1f} ms"
                )
    lines += ["", "| database | fill | goal |", "|---|---:|---:|"]
    for result in results:
        lines.append(f"| {result.name} | {result.fill_seconds:.0f} s | {FILL_GOAL_SECONDS:.0f} s |")
        if result.fill_seconds > FILL_GOAL_SECONDS:
            problems.append(f"{result.name} fill: {result.fill_seconds:.0f} s")
    lines += [
        "",
        f"Goals: every list p50 <= {LIST_GOAL_P50_MS:.0f} ms and p99 <= {LIST_GOAL_P99_MS:.0f} ms; "
        f"fill <= {FILL_GOAL_SECONDS:.0f} s.",
        "",
    ]
    lines += [f"- NOT met: {problem}" for problem in problems] or ["Every goal met."]
    return "\n".join(lines) + "\n", bool(problems)
