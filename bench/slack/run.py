"""Running the Slack bot benchmark and writing its report."""

import os
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness import (
    RESULTS_DIR,
    SECRET_KEY,
    closing_lines,
    run_benchmark,
    running_server,
    server_log,
)
from bench.slack.bot_setup import create_people, set_up_chat, slack_server_env, slack_workspace
from bench.slack.cluster import REPLICAS, measure_cluster
from bench.slack.phases import measure_baseline, measure_burst, measure_clicks, note_direct_messages
from bench.slack.records import (
    CHANNELS,
    CONCURRENCY,
    SLACK_MESSAGES_PER_SECOND,
    Outcome,
    People,
    Row,
)
from models.core.clock import utc_now
from models.core.settings import Settings
from testing.slack import SlackServer


def main() -> int:
    """Run every phase, print and save the report; 1 when a card was lost or a check failed."""
    return run_benchmark("slack", measure_all, needs_wrk=False)


def measure_all() -> tuple[str, bool]:
    """Every phase against one server on SQLite and the Slack-compatible server, then the
    cluster phases against three replicas on PostgreSQL."""
    started = time.perf_counter()
    outcome = Outcome()
    log_path = RESULTS_DIR / "server-slack.log"
    with (
        tempfile.TemporaryDirectory(prefix="accessgate-bench-slack-") as tmp,
        slack_workspace() as slack,
    ):
        settings = Settings(data_dir=Path(tmp) / "data", database_url="", secret_key=SECRET_KEY)
        people = create_people(settings)
        with running_server(slack_server_env(settings, slack), log_path) as base_url:
            print(f"server up at {base_url}", flush=True)
            run_phases(f"{base_url}/api", slack, people, outcome)
    note_server_log(log_path, outcome)
    for replica_log in measure_cluster(outcome):
        note_server_log(replica_log, outcome)
    return render_report(outcome, time.perf_counter() - started), bool(outcome.problems)


def run_phases(api_url: str, slack: SlackServer, people: People, outcome: Outcome) -> None:
    """Set the bot up, then the baseline, the clicks and the burst, appending to ``outcome``."""
    with httpx.Client(base_url=api_url, timeout=30) as api:
        set_up_chat(api, slack, people)
        print("chat bot connected", flush=True)
        baseline = measure_baseline(f"{api_url}/healthz")
        outcome.rows.append(Row("baseline `GET /api/healthz`", baseline[0], baseline[1], 1.0))
        print(f"baseline: {baseline[0]:.0f} req/s, p50 {baseline[1].p50_ms:.1f} ms", flush=True)
        measure_clicks(api, api_url, slack, people, baseline[1].p50_ms, outcome)
        measure_burst(api_url, slack, people, outcome)
        note_direct_messages(slack, outcome)


def note_server_log(log_path: Path, outcome: Outcome) -> None:
    """Count what the server logged (warning level and up), quote a few lines; errors fail."""
    lines, errors = server_log(log_path)
    if not lines:
        outcome.notes.append("the server logged nothing at warning level or above")
        return
    postponed = sum(1 for line in lines if "postponed" in line)
    outcome.notes.append(
        f"the server logged {len(lines)} lines to {log_path.name}: {len(errors)} with errors, "
        f"{postponed} deliveries postponed; first ones: " + " | ".join(lines[:3])
    )
    if errors:
        outcome.problems.append(f"the server logged errors, see {log_path}: {errors[0]}")


def render_report(outcome: Outcome, elapsed: float) -> str:
    """The Markdown report: table, phases, targets, checks, notes and problems."""
    lines = [
        "# Slack bot benchmark",
        "",
        f"{utc_now():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, one server on SQLite, then "
        f"{REPLICAS} replicas on one PostgreSQL (cluster rows), {CHANNELS} channels; "
        f"Slack-compatible server in the load generator's process enforcing "
        f"{SLACK_MESSAGES_PER_SECOND:g} message/s per channel; {CONCURRENCY} requests or clicks "
        f"in flight; run took {elapsed:.0f} s.",
        "",
        *table(outcome.rows),
        "",
        "Per second: requests answered (baseline), clicks acked (both click rows), cards posted "
        "(burst).",
        "",
        *(f"- {phase}" for phase in outcome.phases),
        "",
        "Targets:",
        "",
        *(f"- {target}" for target in outcome.targets),
        "",
        "Checks:",
        "",
        *(f"- {check}" for check in outcome.checks),
        "",
    ]
    if outcome.notes:
        lines += ["Notes:", "", *(f"- {note}" for note in outcome.notes), ""]
    lines += closing_lines(
        outcome.problems, "No problems: no card lost or duplicated and every check passed."
    )
    return "\n".join(lines)


def table(rows: list[Row]) -> list[str]:
    """The results as Markdown table lines."""
    lines = [
        "| measurement | count | per second | p50 ms | p99 ms | max ms | p50 ratio to baseline |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        latencies = row.latencies
        ratio = "—" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"| {row.measurement} | {latencies.count} | {row.per_second:.1f} "
            f"| {latencies.p50_ms:.1f} | {latencies.p99_ms:.1f} | {latencies.max_ms:.1f} "
            f"| {ratio} |"
        )
    return lines
