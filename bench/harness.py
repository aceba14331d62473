"""What every benchmark shares: the server run as a user runs it, wrk, and the report's frame.

A benchmark module supplies what it measures and how it reports; ``run_benchmark`` does the
rest: the report goes to stdout and ``bench/results/NAME.md``, and the exit status is 1 when a
run had errors or a check failed (missing a performance target is reported, not fatal).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import Session

from models.connections.schema import ConnectionCreate
from models.connections.service import create_connection
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope, upgrade_database
from models.core.settings import Settings
from models.users.schema import User
from models.users.service import upsert_user
from testing.postgres import PostgresCluster, free_port

BENCH_DIR = Path(__file__).resolve().parent

RESULTS_DIR = BENCH_DIR / "results"

REPORT_SCRIPT = BENCH_DIR / "report.lua"

WARMUP_SECONDS = 2

MEASURE_SECONDS = 8

WRK_THREADS = 2

# wrk counts an answer slower than this as a timeout and leaves it out of the latency
# histogram; keep slow answers in the p99. (A request never answered is not counted at all:
# the database check catches those.)
WRK_TIMEOUT_SECONDS = 10

SERVER_START_TIMEOUT_SECONDS = 30

# After wrk stops, the server still finishes the requests that were in flight; wait for their
# approvals, but not forever if the server has stalled.
SETTLE_POLL_SECONDS = 0.2

SETTLE_QUIET_SECONDS = 3.0

SECRET_KEY = "accessgate-bench-secret-key-not-for-production-use"

ADMIN_SUB = "bench-admin"

REQUESTER_SUB = "bench-requester"

REVIEWER_SUB = "bench-reviewer"

HEALTHZ = "GET /api/healthz"
CONNECTION_NAME = "bench-db"
NO_ERRORS = "No errors: every request answered 2xx and the database agrees with wrk."


# One benchmark's backend: measure a database (SQLite when the URL is empty), adding to the outcome.
BackendBench = Callable[[str, str, "Outcome"], None]


def run_benchmark(
    name: str, measure: Callable[[], tuple[str, bool]], *, needs_wrk: bool = True
) -> int:
    """Run ``measure`` (the report and whether it found problems); print and save the report."""
    if needs_wrk and shutil.which("wrk") is None:
        print("wrk is not installed; `make bench` installs it with apt", file=sys.stderr)
        return 2
    RESULTS_DIR.mkdir(exist_ok=True)
    started = time.perf_counter()
    report, had_problems = measure()
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(report)
    print()
    print(report, end="")
    print(f"\nwritten to {path} in {time.perf_counter() - started:.0f} s")
    return 1 if had_problems else 0


def on_both_databases(bench_backend: BackendBench, outcome: "Outcome") -> None:
    """Run one benchmark on SQLite, then on a throwaway PostgreSQL cluster."""
    bench_backend("sqlite", "", outcome)
    with postgres_database() as url:
        bench_backend("postgresql", url, outcome)


@contextmanager
def seeded_database(database_url: str) -> Iterator[tuple[Session, User]]:
    """A migrated database with the admin and the benchmark's connection: (db, admin)."""
    engine = create_db_engine(database_url)
    try:
        upgrade_database(engine)
        with db_scope(engine) as db:
            admin = upsert_user(db=db, sub=ADMIN_SUB, groups=["admin"])
            create_connection(
                db=db, actor=admin, request=ConnectionCreate(name=CONNECTION_NAME, type="database")
            )
            yield db, admin
    finally:
        engine.dispose()


def render_wrk_report(
    *, title: str, setting: str, outcome: "Outcome", targets: str, target_lines: list[str]
) -> str:
    """A wrk benchmark's Markdown report: the table, the targets, the checks and the problems."""
    lines = [
        f"# {title}",
        "",
        f"{utc_now():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, wrk {WRK_THREADS} threads, "
        f"{MEASURE_SECONDS} s per measurement after a {WARMUP_SECONDS} s warm-up{setting}.",
        "",
        *table(outcome.rows),
        "",
        targets,
        "",
        *target_lines,
        "",
        "Checks:",
        "",
        *(f"- {check}" for check in outcome.checks),
        "",
        *closing_lines(outcome.problems, NO_ERRORS),
    ]
    return "\n".join(lines)


def closing_lines(problems: list[str], all_good: str) -> list[str]:
    """The report's last section: every problem, or the sentence saying there was none."""
    if problems:
        return ["PROBLEMS:", "", *(f"- {problem}" for problem in problems), ""]
    return [all_good, ""]


def server_log(log_path: Path) -> tuple[list[str], list[str]]:
    """What the server logged (warning level and up), and the lines of those that are errors."""
    lines = log_path.read_text(errors="replace").splitlines()
    return lines, [line for line in lines if "Traceback" in line or "ERROR" in line]


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


@contextmanager
def postgres_database() -> Iterator[str]:
    """A database in a throwaway PostgreSQL cluster, removed afterwards even on error."""
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster.create_database("bench")
    finally:
        cluster.stop()


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


def measure_baseline(name: str, base_url: str, concurrency: int, outcome: Outcome) -> WrkResult:
    """GET /api/healthz after a warm-up, recorded as the baseline row of this concurrency."""
    healthz_url = f"{base_url}/api/healthz"
    run_wrk(healthz_url, concurrency, WARMUP_SECONDS, REPORT_SCRIPT)
    baseline = run_wrk(healthz_url, concurrency, MEASURE_SECONDS, REPORT_SCRIPT)
    outcome.rows.append(Row(name, HEALTHZ, concurrency, baseline, baseline.rate))
    note_errors(f"{name} {HEALTHZ} c={concurrency}", baseline, outcome)
    print(f"[{name}] c={concurrency} {HEALTHZ}: {summary(baseline)}", flush=True)
    return baseline


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


def report_server_log(name: str, log_path: Path, outcome: Outcome) -> None:
    """Surface anything the server logged at warning level or above."""
    lines, errors = server_log(log_path)
    if not lines:
        return
    print(f"[{name}] the server logged {len(lines)} lines to {log_path}; last ones:")
    for line in lines[-10:]:
        print(f"    {line}")
    if errors:
        outcome.problems.append(f"{name}: the server logged errors, see {log_path}")
