"""Benchmark: approving reviews over HTTP, against a trivial endpoint of the same app.

For SQLite and then PostgreSQL it fills a fresh database with pending reviews through the
project's own services, starts ``accessgate serve`` as a user would, and drives it with wrk
from a separate process: ``GET /api/healthz`` is the baseline, then ``PUT /api/reviews/{id}``
approves a different review on every request. After each approval run the database must hold
exactly the approvals wrk sent.

Results go to stdout and bench/results/reviews.md. The exit status is 1 when a run had errors
or the database disagrees with wrk; missing the performance targets is reported, not fatal.

Run it with ``make bench`` (which installs wrk) or ``.venv/bin/python -m bench.reviews``.
"""

import math
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, func
from sqlmodel import select

from bench.harness import (
    BENCH_DIR,
    CONNECTION_NAME,
    MEASURE_SECONDS,
    REQUESTER_SUB,
    RESULTS_DIR,
    REVIEWER_SUB,
    SECRET_KEY,
    SETTLE_POLL_SECONDS,
    SETTLE_QUIET_SECONDS,
    WARMUP_SECONDS,
    WRK_THREADS,
    Outcome,
    Row,
    WrkResult,
    measure_baseline,
    note_errors,
    on_both_databases,
    render_wrk_report,
    report_server_log,
    run_benchmark,
    run_wrk,
    running_server,
    seeded_database,
    server_env,
    summary,
)
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope
from models.core.sealing import SecretBox
from models.core.settings import Settings, resolve_secret_key
from models.plugins.schema import PluginConnectionIn, PluginCreate
from models.plugins.service import create_plugin
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review
from models.sessions.schema import SessionCreate, SessionPublic
from models.sessions.service import open_session
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user

APPROVE_SCRIPT = BENCH_DIR / "approve.lua"

CONCURRENCIES = (16, 64)
# Reviews are created at only ~300/s through the services, so the pool is sized from a rate
# estimate: about twice the fastest approval rate seen on a 2-CPU machine (~170/s).
# Running out shows up as 404s (see approve.lua), never as a review approved twice.
APPROVALS_PER_SECOND_ESTIMATE = 300

TARGET_CONCURRENCY = 16
# Approvals per second as a share of the trivial endpoint's, by backend: PostgreSQL pays a
# network round trip per statement that SQLite does not.
TARGET_RATIOS = {"sqlite": 0.25, "postgresql": 0.15}
TARGET_P99_MS = 100.0

REVIEWER_GROUP = "bench-reviewers"

APPROVE = "PUT /api/reviews/{id}"


def bench_backend(name: str, database_url: str, outcome: Outcome) -> None:
    """Prepare a database, serve it and measure every concurrency, appending to ``outcome``."""
    with tempfile.TemporaryDirectory(prefix=f"accessgate-bench-{name}-") as tmp:
        work = Path(tmp)
        settings = Settings(
            data_dir=work / "data", database_url=database_url, secret_key=SECRET_KEY
        )
        db_url = settings.resolved_database_url()
        count = reviews_needed()
        print(f"[{name}] creating {count} pending reviews through the services...", flush=True)
        started = time.perf_counter()
        ids = prepare_reviews(db_url, SecretBox(resolve_secret_key(settings)), count)
        print(f"[{name}] created in {time.perf_counter() - started:.1f} s", flush=True)
        ids_file = work / "review-ids.txt"
        ids_file.write_text("\n".join(ids) + "\n")
        token_file = work / "token"
        token_file.write_text(mint_token(settings))
        log_path = RESULTS_DIR / f"server-{name}.log"
        with running_server(server_env(settings), log_path) as base_url:
            print(f"[{name}] server up at {base_url}", flush=True)
            measure(name, base_url, db_url, ids_file, token_file, outcome)
        report_server_log(name, log_path, outcome)


def reviews_needed() -> int:
    """Pending reviews for every approval run, warm-ups included, at the estimated rate."""
    seconds = len(CONCURRENCIES) * (WARMUP_SECONDS + MEASURE_SECONDS)
    # Requests in flight when wrk stops still consume an id each.
    return math.ceil(seconds * APPROVALS_PER_SECOND_ESTIMATE) + 2 * sum(CONCURRENCIES)


def prepare_reviews(database_url: str, secret_box: SecretBox, count: int) -> list[str]:
    """Create the users, the reviewed connection and ``count`` sessions; their review ids."""
    with seeded_database(database_url) as (db, admin):
        requester = upsert_user(db=db, sub=REQUESTER_SUB, groups=["dev"])
        upsert_user(db=db, sub=REVIEWER_SUB, groups=[REVIEWER_GROUP])
        create_plugin(
            db=db,
            actor=admin,
            request=PluginCreate(
                name="review",
                connections=[PluginConnectionIn(name=CONNECTION_NAME, config=[REVIEWER_GROUP])],
            ),
            secret_box=secret_box,
        )
        request = SessionCreate(connection=CONNECTION_NAME, script="select 1")
        return [
            pending_review_id(open_session(db=db, owner=requester, request=request, now=utc_now()))
            for _ in range(count)
        ]


def pending_review_id(gateway_session: SessionPublic) -> str:
    """The id of the session's review, which must exist and be PENDING."""
    review = gateway_session.review
    if review is None or review.status is not ReviewStatus.PENDING:
        raise RuntimeError(f"session {gateway_session.id} did not get a pending review")
    return str(review.id)


def mint_token(settings: Settings) -> str:
    """A bearer token for the reviewer, signed with the server's key."""
    return issue_local_token(
        key=resolve_secret_key(settings), sub=REVIEWER_SUB, now=utc_now(), ttl=timedelta(hours=1)
    )


def measure(
    name: str, base_url: str, db_url: str, ids_file: Path, token_file: Path, outcome: Outcome
) -> None:
    """Baseline then approvals at each concurrency, checking approvals against the database."""
    approvals = ApprovalRunner(name, f"{base_url}/api/reviews", db_url, ids_file, token_file)
    for concurrency in CONCURRENCIES:
        baseline = measure_baseline(name, base_url, concurrency, outcome)
        approvals.run(concurrency, WARMUP_SECONDS, "warm-up", outcome)
        result, matches = approvals.run(concurrency, MEASURE_SECONDS, "measured", outcome)
        outcome.rows.append(Row(name, APPROVE, concurrency, result, baseline.rate, matches))


@dataclass
class ApprovalRunner:
    """Approval runs against one server, each on review ids no earlier run used."""

    backend: str
    url: str
    db_url: str
    ids_file: Path
    token_file: Path
    next_line: int = 0
    approved: int = 0
    """APPROVED reviews in the database after the previous run (none before the first)."""

    def run(
        self, concurrency: int, seconds: int, label: str, outcome: Outcome
    ) -> tuple[WrkResult, bool]:
        """One wrk run of approvals, and whether the database agrees with it."""
        script_args = [
            str(self.ids_file),
            str(self.token_file),
            str(self.next_line),
            str(WRK_THREADS),
        ]
        result = run_wrk(self.url, concurrency, seconds, APPROVE_SCRIPT, script_args)
        # Each thread walks its own stride; the next run starts past the furthest one.
        self.next_line += WRK_THREADS * result.busiest_thread_issued
        expected = self.approved + result.ok + result.unanswered
        total = settled_approved_count(self.db_url, expected)
        approved, self.approved = total - self.approved, total
        run_name = f"{self.backend} {APPROVE} c={concurrency} ({label})"
        note_errors(run_name, result, outcome)
        check, matches = check_approvals(run_name, result, approved, outcome)
        print(f"[{self.backend}] c={concurrency} approvals, {label}: {summary(result)}")
        print(f"[{self.backend}]   {check}", flush=True)
        return result, matches


def settled_approved_count(db_url: str, expected: int) -> int:
    """The APPROVED reviews, once they reach ``expected`` or stop moving, via a fresh engine."""
    engine = create_db_engine(db_url)
    try:
        count = approved_count(engine)
        quiet_since = time.monotonic()
        while count < expected and time.monotonic() - quiet_since < SETTLE_QUIET_SECONDS:
            time.sleep(SETTLE_POLL_SECONDS)
            latest = approved_count(engine)
            if latest != count:
                count, quiet_since = latest, time.monotonic()
        return count
    finally:
        engine.dispose()


def approved_count(engine: Engine) -> int:
    """How many reviews are APPROVED right now."""
    with db_scope(engine) as db:
        statement = (
            select(func.count()).select_from(Review).where(Review.status == ReviewStatus.APPROVED)
        )
        return db.exec(statement).one()


def check_approvals(
    run_name: str, result: WrkResult, approved: int, outcome: Outcome
) -> tuple[str, bool]:
    """Compare the approvals the database gained with the ones wrk saw; describe the result.

    wrk stops the clock with up to one request per connection still in flight; the server
    completes those, so they count as approvals wrk sent but did not see answered.
    """
    expected = result.ok + result.unanswered
    matches = approved == expected
    line = (
        f"DB check: {approved} reviews newly APPROVED in the database; wrk counted "
        f"{result.ok} 2xx approvals + {result.unanswered} sent but unanswered when it stopped "
        f"= {expected}: {'OK' if matches else 'MISMATCH'}"
    )
    outcome.checks.append(f"{run_name}: {line}")
    if not matches:
        outcome.problems.append(f"{run_name}: {line}")
    return line, matches


def render_report(outcome: Outcome) -> str:
    """The Markdown report: table, targets, database checks and problems."""
    return render_wrk_report(
        title="Review approval benchmark",
        setting="",
        outcome=outcome,
        targets=f"Targets at {TARGET_CONCURRENCY} concurrent: approvals >= "
        + " / ".join(f"{ratio:.0%} ({name})" for name, ratio in TARGET_RATIOS.items())
        + f" of the baseline's throughput, approval p99 <= {TARGET_P99_MS:.0f} ms.",
        target_lines=target_lines(outcome.rows),
    )


def target_lines(rows: list[Row]) -> list[str]:
    """Whether each backend's approvals meet the targets."""
    lines = []
    for row in rows:
        if row.endpoint != APPROVE or row.concurrency != TARGET_CONCURRENCY:
            continue
        ratio_met = "met" if row.ratio >= TARGET_RATIOS[row.backend] else "NOT met"
        p99_met = "met" if row.result.p99_ms <= TARGET_P99_MS else "NOT met"
        lines.append(
            f"- {row.backend}: ratio {row.ratio:.2f} ({ratio_met}), "
            f"p99 {row.result.p99_ms:.1f} ms ({p99_met})"
        )
    return lines


def main() -> int:
    """Approvals on SQLite and PostgreSQL; 1 when a run had errors or the database disagrees."""

    def measure_all() -> tuple[str, bool]:
        outcome = Outcome(rows=[], checks=[], problems=[])
        on_both_databases(bench_backend, outcome)
        return render_report(outcome), bool(outcome.problems)

    return run_benchmark("reviews", measure_all)


if __name__ == "__main__":
    sys.exit(main())
