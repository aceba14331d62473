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

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, func
from sqlmodel import select

from models.connections.schema import ConnectionCreate
from models.connections.service import create_connection
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope, upgrade_database
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
from tests.support.postgres import PostgresCluster, free_port

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
APPROVE_SCRIPT = BENCH_DIR / "approve.lua"
REPORT_SCRIPT = BENCH_DIR / "report.lua"

CONCURRENCIES = (16, 64)
WARMUP_SECONDS = 2
MEASURE_SECONDS = 8
WRK_THREADS = 2
# wrk counts an answer slower than this as a timeout and leaves it out of the latency
# histogram; keep slow answers in the p99. (A request never answered is not counted at all:
# the database check catches those.)
WRK_TIMEOUT_SECONDS = 10
# Reviews are created at only ~300/s through the services, so the pool is sized from a rate
# estimate: about twice the fastest approval rate seen on a 2-CPU machine (~170/s).
# Running out shows up as 404s (see approve.lua), never as a review approved twice.
APPROVALS_PER_SECOND_ESTIMATE = 300
SERVER_START_TIMEOUT_SECONDS = 30
# After wrk stops, the server still finishes the requests that were in flight; wait for their
# approvals, but not forever if the server has stalled.
SETTLE_POLL_SECONDS = 0.2
SETTLE_QUIET_SECONDS = 3.0

TARGET_CONCURRENCY = 16
TARGET_RATIO = 0.40
TARGET_P99_MS = 50.0

SECRET_KEY = "accessgate-bench-secret-key-not-for-production-use"
ADMIN_SUB = "bench-admin"
REQUESTER_SUB = "bench-requester"
REVIEWER_SUB = "bench-reviewer"
REVIEWER_GROUP = "bench-reviewers"
CONNECTION_NAME = "bench-db"

HEALTHZ = "GET /api/healthz"
APPROVE = "PUT /api/reviews/{id}"


@dataclass(frozen=True)
class WrkResult:
    """What one wrk run reported through report.lua."""

    requests: int
    duration_s: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    sent: int
    busiest_thread_issued: int
    exhausted: int
    issued_per_thread: tuple[int, ...]
    """request() calls of each wrk thread, in thread order (thread 0's first is never sent)."""

    @property
    def rate(self) -> float:
        """Completed requests per second."""
        return self.requests / self.duration_s

    @property
    def ok(self) -> int:
        """Responses below 400 (wrk counts statuses from 400 up as errors)."""
        return self.requests - self.non_2xx

    @property
    def unanswered(self) -> int:
        """Requests wrk sent but stopped waiting for when its time ran out."""
        return self.sent - self.requests


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    backend: str
    endpoint: str
    concurrency: int
    result: WrkResult
    baseline_rate: float
    db_matches: bool = True

    @property
    def ratio(self) -> float:
        """Throughput relative to the baseline at the same backend and concurrency."""
        return self.result.rate / self.baseline_rate


@dataclass
class Outcome:
    """Everything measured, and every problem that makes the run fail."""

    rows: list[Row]
    checks: list[str]
    problems: list[str]


def main() -> int:
    """Run every backend, print and save the table; 1 when any run had errors."""
    if shutil.which("wrk") is None:
        print("wrk is not installed; `make bench` installs it with apt", file=sys.stderr)
        return 2
    RESULTS_DIR.mkdir(exist_ok=True)
    started = time.perf_counter()
    outcome = Outcome(rows=[], checks=[], problems=[])
    bench_backend("sqlite", "", outcome)
    with postgres_database() as url:
        bench_backend("postgresql", url, outcome)
    report = render_report(outcome)
    (RESULTS_DIR / "reviews.md").write_text(report)
    print()
    print(report, end="")
    print(f"\nwritten to {RESULTS_DIR / 'reviews.md'} in {time.perf_counter() - started:.0f} s")
    return 1 if outcome.problems else 0


@contextmanager
def postgres_database() -> Iterator[str]:
    """A database in a throwaway PostgreSQL cluster, removed afterwards even on error."""
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster.create_database("bench")
    finally:
        cluster.stop()


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
    engine = create_db_engine(database_url)
    try:
        upgrade_database(engine)
        with db_scope(engine) as db:
            admin = upsert_user(db=db, sub=ADMIN_SUB, groups=["admin"])
            requester = upsert_user(db=db, sub=REQUESTER_SUB, groups=["dev"])
            upsert_user(db=db, sub=REVIEWER_SUB, groups=[REVIEWER_GROUP])
            create_connection(
                db=db,
                actor=admin,
                request=ConnectionCreate(name=CONNECTION_NAME, type="database"),
            )
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
                pending_review_id(
                    open_session(db=db, owner=requester, request=request, now=utc_now())
                )
                for _ in range(count)
            ]
    finally:
        engine.dispose()


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


def server_env(settings: Settings) -> dict[str, str]:
    """The environment of the server: this one, with only the benchmark's ACCESSGATE_* vars."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACCESSGATE_")}
    env["ACCESSGATE_DATA_DIR"] = str(settings.data_dir)
    env["ACCESSGATE_SECRET_KEY"] = settings.secret_key
    if settings.database_url:
        env["ACCESSGATE_DATABASE_URL"] = settings.database_url
    return env


@contextmanager
def running_server(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """``accessgate serve`` on a free port, logging to ``log_path``; yields its base URL."""
    port = free_port()
    command = [
        str(Path(sys.prefix) / "bin" / "accessgate"),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_healthy(base_url, server)
            yield base_url
        finally:
            stop_process(server)


def wait_until_healthy(base_url: str, server: subprocess.Popen[bytes]) -> None:
    """Return once GET /api/healthz answers 200; raise if the server exits or never does."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{base_url}/api/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not answer within {SERVER_START_TIMEOUT_SECONDS} s")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Ask the process to stop (uvicorn shuts down gracefully on SIGTERM), kill it if stuck."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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


def measure_baseline(name: str, base_url: str, concurrency: int, outcome: Outcome) -> WrkResult:
    """GET /api/healthz after a warm-up, recorded as the baseline row of this concurrency."""
    healthz_url = f"{base_url}/api/healthz"
    run_wrk(healthz_url, concurrency, WARMUP_SECONDS, REPORT_SCRIPT)
    baseline = run_wrk(healthz_url, concurrency, MEASURE_SECONDS, REPORT_SCRIPT)
    outcome.rows.append(Row(name, HEALTHZ, concurrency, baseline, baseline.rate))
    note_errors(f"{name} {HEALTHZ} c={concurrency}", baseline, outcome)
    print(f"[{name}] c={concurrency} {HEALTHZ}: {summary(baseline)}", flush=True)
    return baseline


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


def run_wrk(
    url: str, connections: int, seconds: int, script: Path, script_args: list[str] | None = None
) -> WrkResult:
    """Run wrk against ``url`` and parse the line report.lua prints."""
    command = [
        "wrk",
        f"-t{WRK_THREADS}",
        f"-c{connections}",
        f"-d{seconds}s",
        f"--timeout={WRK_TIMEOUT_SECONDS}s",
        "--latency",
        f"-s{script}",
        url,
    ]
    if script_args:
        command += ["--", *script_args]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in completed.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return parse_result(json.loads(line.removeprefix("BENCH_RESULT ")))
    raise RuntimeError(
        f"wrk gave no result (status {completed.returncode}):\n"
        f"{completed.stdout}\n{completed.stderr}"
    )


def parse_result(raw: dict[str, Any]) -> WrkResult:
    """Turn report.lua's JSON (microseconds, counters) into a WrkResult."""
    return WrkResult(
        requests=raw["requests"],
        duration_s=raw["duration_us"] / 1e6,
        p50_ms=raw["p50_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        non_2xx=raw["non_2xx"],
        socket_errors=sum(
            raw[key] for key in ("connect_errors", "read_errors", "write_errors", "timeouts")
        ),
        sent=raw["sent"],
        busiest_thread_issued=raw["busiest_thread_issued"],
        exhausted=raw["exhausted"],
        issued_per_thread=tuple(raw["issued_per_thread"]),
    )


def summary(result: WrkResult) -> str:
    """One line for the progress output."""
    return (
        f"{result.rate:.0f} req/s, p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, "
        f"{result.requests} requests, {result.non_2xx} non-2xx, "
        f"{result.socket_errors} socket errors/timeouts"
    )


def note_errors(run_name: str, result: WrkResult, outcome: Outcome) -> None:
    """Record non-2xx answers, socket errors and running out of review ids as problems."""
    if result.non_2xx:
        outcome.problems.append(f"{run_name}: {result.non_2xx} non-2xx responses")
    if result.socket_errors:
        outcome.problems.append(f"{run_name}: {result.socket_errors} socket errors or timeouts")
    if result.exhausted:
        outcome.problems.append(
            f"{run_name}: ran out of review ids {result.exhausted} times; "
            "raise APPROVALS_PER_SECOND_ESTIMATE"
        )


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
    lines = [
        "# Review approval benchmark",
        "",
        f"{utc_now():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, wrk {WRK_THREADS} threads, "
        f"{MEASURE_SECONDS} s per measurement after a {WARMUP_SECONDS} s warm-up.",
        "",
        *table(outcome.rows),
        "",
        f"Targets at {TARGET_CONCURRENCY} concurrent: approvals >= {TARGET_RATIO:.0%} of "
        f"baseline throughput, approval p99 <= {TARGET_P99_MS:.0f} ms.",
        "",
        *target_lines(outcome.rows),
        "",
        "Database checks:",
        "",
        *(f"- {check}" for check in outcome.checks),
        "",
    ]
    if outcome.problems:
        lines += ["PROBLEMS:", "", *(f"- {problem}" for problem in outcome.problems), ""]
    else:
        lines += ["No errors: every request answered 2xx and the database agrees with wrk.", ""]
    return "\n".join(lines)


def table(rows: list[Row]) -> list[str]:
    """The results as Markdown table lines."""
    lines = [
        "| backend | endpoint | concurrency | requests/s | p50 ms | p99 ms | ratio to baseline "
        "| non-2xx |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        result = row.result
        errors = str(result.non_2xx)
        if result.socket_errors:
            errors += f" (+{result.socket_errors} socket errors)"
        if result.exhausted:
            errors += " (ran out of review ids)"
        if not row.db_matches:
            errors += " (DB check MISMATCH)"
        lines.append(
            f"| {row.backend} | `{row.endpoint}` | {row.concurrency} | {result.rate:.0f} "
            f"| {result.p50_ms:.1f} | {result.p99_ms:.1f} | {row.ratio:.2f} | {errors} |"
        )
    return lines


def target_lines(rows: list[Row]) -> list[str]:
    """Whether each backend's approvals meet the targets."""
    lines = []
    for row in rows:
        if row.endpoint != APPROVE or row.concurrency != TARGET_CONCURRENCY:
            continue
        ratio_met = "met" if row.ratio >= TARGET_RATIO else "NOT met"
        p99_met = "met" if row.result.p99_ms <= TARGET_P99_MS else "NOT met"
        lines.append(
            f"- {row.backend}: ratio {row.ratio:.2f} ({ratio_met}), "
            f"p99 {row.result.p99_ms:.1f} ms ({p99_met})"
        )
    return lines


def report_server_log(name: str, log_path: Path, outcome: Outcome) -> None:
    """Surface anything the server logged at warning level or above."""
    lines = log_path.read_text(errors="replace").splitlines()
    if not lines:
        return
    print(f"[{name}] the server logged {len(lines)} lines to {log_path}; last ones:")
    for line in lines[-10:]:
        print(f"    {line}")
    if any("Traceback" in line or "ERROR" in line for line in lines):
        outcome.problems.append(f"{name}: the server logged errors, see {log_path}")


if __name__ == "__main__":
    sys.exit(main())
