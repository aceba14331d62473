"""Benchmark: what webhooks cost approvals. Approvals per second with the webhooks plugin and
two endpoints (real receivers on loopback, in this process) as a ratio to approvals without.

Same set-up as ``bench.reviews`` (reviews made through the services, ``accessgate serve``, wrk
from another process), on SQLite and PostgreSQL, at 16 concurrent. Each database is served
once: approvals are measured first without webhooks, then with the plugin installed and two
endpoints receiving every approval; then the benchmark waits for every delivery and says how
long after the run the last one arrived. Goal: with / without >= 0.9.

Run it with ``make bench`` or ``.venv/bin/python -m bench.webhooks``.
"""

import json
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx

from bench.harness import (
    ADMIN_SUB,
    MEASURE_SECONDS,
    RESULTS_DIR,
    SECRET_KEY,
    WARMUP_SECONDS,
    Outcome,
    Row,
    measure_baseline,
    on_both_databases,
    render_wrk_report,
    report_server_log,
    run_benchmark,
    running_server,
    server_env,
)
from bench.reviews import APPROVE, ApprovalRunner, mint_token, prepare_reviews
from models.core.clock import utc_now
from models.core.sealing import SecretBox
from models.core.settings import Settings, resolve_secret_key
from models.sign_in.tokens import issue_local_token
from testing.receivers import Receiver

CONCURRENCY = 16
TARGET_RATIO = 0.9
REVIEWS = 7000  # enough for two warm-ups and two measured runs at the fastest rate seen
WITH = f"{APPROVE} with 2 webhook endpoints"
WITHOUT = f"{APPROVE} without webhooks"
DELIVERY_WAIT_SECONDS = 120


def bench_backend(name: str, database_url: str, outcome: Outcome) -> None:
    with tempfile.TemporaryDirectory(prefix=f"accessgate-bench-webhooks-{name}-") as tmp:
        work = Path(tmp)
        settings = Settings(
            data_dir=work / "data", database_url=database_url, secret_key=SECRET_KEY
        )
        db_url = settings.resolved_database_url()
        print(f"[{name}] creating {REVIEWS} pending reviews through the services...", flush=True)
        ids = prepare_reviews(db_url, SecretBox(resolve_secret_key(settings)), REVIEWS)
        ids_file = work / "review-ids.txt"
        ids_file.write_text("\n".join(ids) + "\n")
        token_file = work / "token"
        token_file.write_text(mint_token(settings))
        admin = {
            "Authorization": "Bearer "
            + issue_local_token(
                key=resolve_secret_key(settings),
                sub=ADMIN_SUB,
                now=utc_now(),
                ttl=timedelta(hours=1),
            )
        }
        log_path = RESULTS_DIR / f"server-webhooks-{name}.log"
        with (
            running_server(server_env(settings), log_path) as base_url,
            Receiver() as first,
            Receiver() as second,
            httpx.Client(base_url=f"{base_url}/api", headers=admin, timeout=30) as api,
        ):
            print(f"[{name}] server up at {base_url}", flush=True)
            baseline = measure_baseline(name, base_url, CONCURRENCY, outcome)
            approvals = ApprovalRunner(
                name, f"{base_url}/api/reviews", db_url, ids_file, token_file
            )
            approvals.run(CONCURRENCY, WARMUP_SECONDS, "warm-up without", outcome)
            without, matches = approvals.run(CONCURRENCY, MEASURE_SECONDS, "without", outcome)
            outcome.rows.append(Row(name, WITHOUT, CONCURRENCY, without, baseline.rate, matches))
            # Endpoints get what happens after they are registered: the approvals so far are
            # not sent (nor is the set-up's backlog of new reviews).
            api.post("/plugins", json={"name": "webhooks"}).raise_for_status()
            for receiver in (first, second):
                api.post("/webhooks/endpoints", json={"url": receiver.url}).raise_for_status()
            before = approvals.approved
            approvals.run(CONCURRENCY, WARMUP_SECONDS, "warm-up with webhooks", outcome)
            with_hooks, matches = approvals.run(CONCURRENCY, MEASURE_SECONDS, "with", outcome)
            outcome.rows.append(Row(name, WITH, CONCURRENCY, with_hooks, baseline.rate, matches))
            wait_for_deliveries(name, approvals.approved - before, (first, second), outcome)
        report_server_log(name, log_path, outcome)


def wait_for_deliveries(
    name: str, approved: int, receivers: tuple[Receiver, ...], outcome: Outcome
) -> None:
    """Every approval made with webhooks on reached both endpoints, once each; how long after
    the measured run the last one arrived says whether delivery kept pace."""
    started = time.monotonic()
    while time.monotonic() - started < DELIVERY_WAIT_SECONDS:
        counts = [
            sum(json.loads(m.body)["type"] == "review.approved" for m in r.snapshot())
            for r in receivers
        ]
        if all(count >= approved for count in counts):
            break
        time.sleep(0.5)
    line = (
        f"{name}: {approved} approvals; the endpoints got {counts} review.approved deliveries "
        f"({time.monotonic() - started:.1f} s after the measured run)"
    )
    print(f"[{name}]   {line}", flush=True)
    outcome.checks.append(line)
    if any(count != approved for count in counts):
        outcome.problems.append(line)


def ratio_lines(rows: list[Row]) -> list[str]:
    lines = []
    for backend in dict.fromkeys(row.backend for row in rows):
        by = {row.endpoint: row for row in rows if row.backend == backend}
        if WITH in by and WITHOUT in by:
            ratio = by[WITH].result.rate / by[WITHOUT].result.rate
            verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
            lines.append(
                f"- {backend}: {by[WITH].result.rate:.0f} approvals/s with webhooks, "
                f"{by[WITHOUT].result.rate:.0f} without: ratio {ratio:.2f} ({verdict})"
            )
    return lines


def measure_all() -> tuple[str, bool]:
    outcome = Outcome(rows=[], checks=[], problems=[])
    on_both_databases(bench_backend, outcome)
    report = render_wrk_report(
        title="Webhooks' cost to approvals",
        setting=f"{CONCURRENCY} concurrent approvals; two endpoints get every event.",
        outcome=outcome,
        targets=f"Target: approvals with webhooks >= {TARGET_RATIO:.0%} of approvals without.",
        target_lines=ratio_lines(outcome.rows),
    )
    return report, bool(outcome.problems)


def main() -> int:
    return run_benchmark("webhooks", measure_all)


if __name__ == "__main__":
    raise SystemExit(main())
