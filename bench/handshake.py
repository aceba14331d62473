"""Benchmark: the sidecar handshake over HTTP, against a trivial endpoint of the same app.

For SQLite and then PostgreSQL it registers many sidecars in a fresh database through the
project's own services, each with its own token and one listener, starts ``accessgate serve``
as a user would, and drives it with wrk from a separate process: ``GET /api/healthz`` is the
baseline, then ``POST /api/sidecars/handshake`` presents a different sidecar's token on every
request, round-robin over all of them. First one handshake through the reference sidecar
client checks what wrk cannot: the answer carries the assigned configuration and a license
signed with the server's key. After each wrk run every sidecar it sent a token of, and no
other, must show that run's version and a last_seen_at from the run.

Results go to stdout and bench/results/handshake.md. The exit status is 1 when a run had errors
or the database disagrees with wrk; missing the performance target is reported, not fatal.

Run it with ``make bench`` (which installs wrk) or ``.venv/bin/python -m bench.handshake``.
"""

import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from api.cli.sidecar import HandshakeFailed, perform_handshake
from bench.harness import (
    BENCH_DIR,
    CONNECTION_NAME,
    MEASURE_SECONDS,
    RESULTS_DIR,
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
from models.sidecars.license import license_signer
from models.sidecars.schema import (
    Listener,
    ListenerProtocol,
    Sidecar,
    SidecarConfig,
    SidecarCreate,
    SidecarCreated,
)
from models.sidecars.service import configure_sidecar, create_sidecar
from models.users.schema import User

HANDSHAKE_SCRIPT = BENCH_DIR / "handshake.lua"

# Enough sidecars that consecutive requests never share a row (64 in flight at most), few
# enough to register in about a second.
SIDECARS = 200
CONCURRENCIES = (16, 64)
TARGET_CONCURRENCY = 64
TARGET_RATIO = 0.50

LISTENER = Listener(
    name="pg", connection=CONNECTION_NAME, protocol=ListenerProtocol.POSTGRES, port=5432
)
CHECK_VERSION = "bench-check"

HANDSHAKE = "POST /api/sidecars/handshake"


def main() -> int:
    """Handshakes on SQLite and PostgreSQL; 1 when a run had errors or a check failed."""

    def measure_all() -> tuple[str, bool]:
        outcome = Outcome(rows=[], checks=[], problems=[])
        on_both_databases(bench_backend, outcome)
        return render_report(outcome), bool(outcome.problems)

    return run_benchmark("handshake", measure_all)


def bench_backend(name: str, database_url: str, outcome: Outcome) -> None:
    """Prepare a database, serve it and measure every concurrency, appending to ``outcome``."""
    with tempfile.TemporaryDirectory(prefix=f"accessgate-bench-handshake-{name}-") as tmp:
        work = Path(tmp)
        settings = Settings(
            data_dir=work / "data", database_url=database_url, secret_key=SECRET_KEY
        )
        db_url = settings.resolved_database_url()
        print(f"[{name}] registering {SIDECARS} sidecars through the services...", flush=True)
        started = time.perf_counter()
        sidecars = prepare_sidecars(db_url, SIDECARS)
        print(f"[{name}] registered in {time.perf_counter() - started:.1f} s", flush=True)
        tokens_file = work / "sidecar-tokens.txt"
        tokens_file.write_text("".join(f"{sidecar.token}\n" for sidecar in sidecars))
        log_path = RESULTS_DIR / f"server-handshake-{name}.log"
        with running_server(server_env(settings), log_path) as base_url:
            print(f"[{name}] server up at {base_url}", flush=True)
            check_one_handshake(name, base_url, settings, sidecars[0], work, outcome)
            runner = HandshakeRunner(
                backend=name,
                url=f"{base_url}/api/sidecars/handshake",
                db_url=db_url,
                tokens_file=tokens_file,
                sidecar_ids=[sidecar.id for sidecar in sidecars],
            )
            measure(name, base_url, runner, outcome)
        report_server_log(name, log_path, outcome)


def prepare_sidecars(database_url: str, count: int) -> list[SidecarCreated]:
    """Create the admin, the connection and ``count`` configured sidecars, with their tokens."""
    with seeded_database(database_url) as (db, admin):
        return [
            register_sidecar(db, admin, f"bench-sidecar-{number:03d}") for number in range(count)
        ]


def register_sidecar(db: Session, admin: User, name: str) -> SidecarCreated:
    """One sidecar with one listener: without listeners its handshake is refused (412)."""
    sidecar = create_sidecar(db=db, actor=admin, request=SidecarCreate(name=name), now=utc_now())
    configure_sidecar(
        db=db,
        actor=admin,
        sidecar_id=sidecar.id,
        config=SidecarConfig(listeners=[LISTENER]),
        now=utc_now(),
    )
    return sidecar


def check_one_handshake(
    name: str,
    base_url: str,
    settings: Settings,
    sidecar: SidecarCreated,
    work: Path,
    outcome: Outcome,
) -> None:
    """Handshake once as a real sidecar does, pinning the server's key: wrk sees only statuses."""
    key_file = work / "license-public-key.pem"
    # The deployment's signing key, as every replica of this database and secret key has it.
    engine = create_db_engine(settings.resolved_database_url())
    try:
        box = SecretBox(resolve_secret_key(settings))
        signer = license_signer(settings, engine=engine, secret_box=box)
        key_file.write_text(signer.public_key_pem())
    finally:
        engine.dispose()
    try:
        body, _ = perform_handshake(
            base_url=base_url, token=sidecar.token, version=CHECK_VERSION, public_key_file=key_file
        )
    except HandshakeFailed as exc:
        problem: str | None = str(exc)
    else:
        problem = answer_problem(body, sidecar)
    check = f"{name}: one handshake of {sidecar.name} through the reference sidecar client: "
    if problem is None:
        check += "configuration as assigned, license signed with the server's key: OK"
    else:
        check += f"FAILED: {problem}"
        outcome.problems.append(check)
    outcome.checks.append(check)
    print(f"[{name}] {check}", flush=True)


def answer_problem(body: dict[str, Any], sidecar: SidecarCreated) -> str | None:
    """What is wrong with a handshake answer whose license verified; None if nothing."""
    expected = {
        "id": str(sidecar.id),
        "name": sidecar.name,
        "version": CHECK_VERSION,
        "config": {"listeners": [LISTENER.model_dump(mode="json")]},
    }
    wrong = [key for key, value in expected.items() if body.get(key) != value]
    return f"unexpected {', '.join(wrong)} in {body}" if wrong else None


def measure(name: str, base_url: str, runner: "HandshakeRunner", outcome: Outcome) -> None:
    """Baseline then handshakes at each concurrency, checking them against the database."""
    for concurrency in CONCURRENCIES:
        baseline = measure_baseline(name, base_url, concurrency, outcome)
        runner.run(concurrency, WARMUP_SECONDS, "warm-up", outcome)
        result, matches = runner.run(concurrency, MEASURE_SECONDS, "measured", outcome)
        outcome.rows.append(Row(name, HANDSHAKE, concurrency, result, baseline.rate, matches))


@dataclass
class HandshakeRunner:
    """Handshake runs against one server, each reporting a version of its own."""

    backend: str
    url: str
    db_url: str
    tokens_file: Path
    sidecar_ids: list[uuid.UUID]
    """In the order of the tokens file."""
    runs: int = 0

    def run(
        self, concurrency: int, seconds: int, label: str, outcome: Outcome
    ) -> tuple[WrkResult, bool]:
        """One wrk run of handshakes, and whether the database agrees with it."""
        self.runs += 1
        # A fresh version per run: a sidecar showing it was handshaken by this run, not before.
        version = f"bench-1.0.{self.runs}"
        started_at = utc_now()
        script_args = [str(self.tokens_file), version, str(WRK_THREADS)]
        result = run_wrk(self.url, concurrency, seconds, HANDSHAKE_SCRIPT, script_args)
        sent = {
            self.sidecar_ids[index]
            for index in sent_token_indexes(result.issued_per_thread, len(self.sidecar_ids))
        }
        recorded = settled_recorded_sidecars(self.db_url, version, started_at, sent)
        run_name = f"{self.backend} {HANDSHAKE} c={concurrency} ({label})"
        note_errors(run_name, result, outcome)
        check, matches = check_handshakes(run_name, version, result, sent, recorded, outcome)
        print(f"[{self.backend}] c={concurrency} handshakes, {label}: {summary(result)}")
        print(f"[{self.backend}]   {check}", flush=True)
        return result, matches


def sent_token_indexes(issued_per_thread: tuple[int, ...], tokens: int) -> set[int]:
    """The lines of the tokens file wrk sent, replaying handshake.lua's round-robin.

    Thread i starts at line i * tokens // threads and moves one line per request() call;
    thread 0's first call is wrk checking the script, never sent (see report.lua).
    """
    threads = len(issued_per_thread)
    sent: set[int] = set()
    for thread, issued in enumerate(issued_per_thread):
        start = thread * tokens // threads
        first_sent = 1 if thread == 0 else 0
        # Past one full lap every further request repeats a token already counted.
        last = min(issued, first_sent + tokens)
        sent.update((start + call) % tokens for call in range(first_sent, last))
    return sent


def settled_recorded_sidecars(
    db_url: str, version: str, since: datetime, expected: set[uuid.UUID]
) -> set[uuid.UUID]:
    """The sidecars recorded by this run, once they cover ``expected`` or stop changing.

    After wrk stops the server still answers the requests in flight; wait for them, but not
    forever if the server has stalled. A fresh engine, as any other client would use.
    """
    engine = create_db_engine(db_url)
    try:
        recorded = recorded_sidecars(engine, version, since)
        quiet_since = time.monotonic()
        while not expected <= recorded and time.monotonic() - quiet_since < SETTLE_QUIET_SECONDS:
            time.sleep(SETTLE_POLL_SECONDS)
            latest = recorded_sidecars(engine, version, since)
            if latest != recorded:
                recorded, quiet_since = latest, time.monotonic()
        return recorded
    finally:
        engine.dispose()


def recorded_sidecars(engine: Engine, version: str, since: datetime) -> set[uuid.UUID]:
    """Sidecars whose recorded handshake carries ``version`` and happened at ``since`` or later."""
    with db_scope(engine) as db:
        rows = db.exec(
            select(Sidecar.id, Sidecar.last_seen_at).where(col(Sidecar.version) == version)
        )
        # Compared here, not in SQL: SQLite stores the times as text.
        return {
            sidecar_id
            for sidecar_id, last_seen_at in rows
            if last_seen_at is not None and last_seen_at >= since
        }


def check_handshakes(
    run_name: str,
    version: str,
    result: WrkResult,
    sent: set[uuid.UUID],
    recorded: set[uuid.UUID],
    outcome: Outcome,
) -> tuple[str, bool]:
    """Compare the sidecars the database shows handshaken with the ones wrk sent; describe it.

    The requests in flight when wrk stops are sent, and the server still records them.
    """
    matches = recorded == sent and bool(sent)
    line = (
        f"DB check: {len(recorded)} sidecars recorded version {version} with a last_seen_at "
        f"from this run; wrk sent {result.sent} handshakes ({result.ok} answered 2xx, "
        f"{result.non_2xx} refused, {result.unanswered} unanswered when it stopped) with the "
        f"tokens of {len(sent)} distinct sidecars"
    )
    if matches:
        line += ": OK"
    else:
        line += (
            f": MISMATCH ({len(sent - recorded)} sent but not recorded, "
            f"{len(recorded - sent)} recorded but not sent)"
        )
        outcome.problems.append(f"{run_name}: {line}")
    outcome.checks.append(f"{run_name}: {line}")
    return line, matches


def render_report(outcome: Outcome) -> str:
    """The Markdown report: table, target, checks and problems."""
    return render_wrk_report(
        title="Sidecar handshake benchmark",
        setting=f", {SIDECARS} sidecars with a token each, used round-robin",
        outcome=outcome,
        targets=f"Target at {TARGET_CONCURRENCY} concurrent: handshakes >= {TARGET_RATIO:.0%} of "
        "baseline throughput.",
        target_lines=target_lines(outcome.rows),
    )


def target_lines(rows: list[Row]) -> list[str]:
    """Whether each backend's handshakes meet the target."""
    return [
        f"- {row.backend}: handshake at {row.concurrency} concurrent: ratio {row.ratio:.2f} vs "
        f"target {TARGET_RATIO:.2f} — {'met' if row.ratio >= TARGET_RATIO else 'NOT met'} "
        f"({row.result.rate:.0f} req/s, p99 {row.result.p99_ms:.1f} ms)"
        for row in rows
        if row.endpoint == HANDSHAKE and row.concurrency == TARGET_CONCURRENCY
    ]


if __name__ == "__main__":
    sys.exit(main())
