"""The Slack bot on three replicas sharing one PostgreSQL (and nothing else but the secret key):
a burst of cards over every channel, then a backlog for one channel longer than many leases."""

import tempfile
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench.harness import RESULTS_DIR, SECRET_KEY, postgres_database, running_server
from bench.slack.bot_setup import create_people, set_up_chat, slack_server_env, slack_workspace
from bench.slack.phases import measure_burst
from bench.slack.records import APP_TOKEN, BURST_REVIEWS, CONNECT_TIMEOUT_SECONDS, Outcome
from models.core.settings import Settings

REPLICAS = 3
BURST_GOAL_SECONDS = 105.0  # one process needs about 100 s for 100 cards per channel
BURST_REFUSALS_ALLOWED = 10
ONE_CHANNEL_REVIEWS = 300


def measure_cluster(outcome: Outcome) -> list[Path]:
    """Both cluster phases; returns the replicas' logs."""
    logs = [RESULTS_DIR / f"server-slack-replica-{n}.log" for n in range(REPLICAS)]
    with (
        tempfile.TemporaryDirectory(prefix="accessgate-bench-cluster-") as tmp,
        postgres_database() as database_url,
        slack_workspace() as slack,
        ExitStack() as stack,
    ):
        replicas = [
            Settings(
                data_dir=Path(tmp) / f"replica-{n}",
                database_url=database_url,
                secret_key=SECRET_KEY,
            )
            for n in range(REPLICAS)
        ]
        people = create_people(replicas[0])
        urls = [
            stack.enter_context(running_server(slack_server_env(settings, slack), log)) + "/api"
            for settings, log in zip(replicas, logs, strict=True)
        ]
        print(f"{REPLICAS} replicas up on one PostgreSQL", flush=True)
        with httpx.Client(base_url=urls[0], timeout=30) as api:
            set_up_chat(api, slack, people)
        slack.wait_connected(APP_TOKEN, timeout=CONNECT_TIMEOUT_SECONDS, count=REPLICAS)
        measure_burst(
            urls,
            slack,
            people,
            outcome,
            name=f"cluster burst, {REPLICAS} replicas",
            reviews=BURST_REVIEWS,
            refusals_allowed=BURST_REFUSALS_ALLOWED,
            goal_seconds=BURST_GOAL_SECONDS,
        )
        measure_burst(
            urls,
            slack,
            people,
            outcome,
            name=f"one channel, {REPLICAS} replicas",
            reviews=ONE_CHANNEL_REVIEWS,
            channels=1,
            refusals_allowed=BURST_REFUSALS_ALLOWED,
        )
    return logs
