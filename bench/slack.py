"""Benchmark: the Slack bot under load, clicks on review cards and a burst of new cards.

``accessgate serve`` runs as a user would, in its own process, on a fresh SQLite database (the
review benchmarks cover PostgreSQL; here the database is not what is measured). This process is
the load generator and hosts the Slack-compatible server of testing/slack/ in a
background thread: the bot's own slack_sdk / slack_bolt clients call its Web API and hold a
Socket Mode WebSocket to it. That server answers 429 to any post beyond Slack's pace of about one
message per second per channel and counts each one as a pacing violation; the bot keeps its
default pace of one new card per second per channel.

Ten connections ``db-0``..``db-9``, each reviewed by the group ``dba`` and mapped to its own
channel ``C0BENCH0``..``C0BENCH9``; a requester and a reviewer with linked Slack accounts, so
every approval also sends the requester a direct message. The load generator shares the machine
(and its CPUs) with the server, as the other benchmarks' wrk does.

1. Baseline: ``GET /api/healthz`` from 16 threads with httpx, the concurrency of the clicks.
2. Clicks: 500 pending reviews over the ten connections, opened with concurrent
   ``POST /api/sessions``; once every card is posted (about 50 s at the pace), the reviewer
   clicks Approve on each card, 16 clicks in flight. Click to ack is the Slack server's
   ``Ack.elapsed`` (envelope sent to ack received); the bot acks before it decides, so clicks
   per second count acks, and the decisions queue behind them. Click to card updated is the
   monotonic time the Slack server stored the first ``chat.update`` of the card (which made it
   APPROVED) minus the monotonic time taken just before the click was handed to the Slack
   server: same process, same clock, and if anything a little long, since it includes the
   Slack server's own hand-over. Every review must then be APPROVED through the API, every card
   must say APPROVED and offer only Revoke, and no review may have a second card.
3. Burst: 1,000 reviews, 100 per connection, opened with concurrent POSTs as fast as the API
   takes them; timed from the first POST to the moment the last card appears. Every review must
   have exactly one card, in its own channel, and no card channel may see a pacing violation
   (in the whole run). Refusals in other channels, the requester's DMs, are reported only.

Results go to stdout and bench/results/slack.md; the server's log to
bench/results/server-slack.log. The exit status is 1 when a card is lost or duplicated or a check
fails; missing a performance target is reported, not fatal.

Run it with ``make bench`` or ``.venv/bin/python -m bench.slack``.
"""

import base64
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import httpx

from bench.harness import (
    ADMIN_SUB,
    REQUESTER_SUB,
    RESULTS_DIR,
    REVIEWER_SUB,
    SECRET_KEY,
    closing_lines,
    run_benchmark,
    running_server,
    server_env,
    server_log,
)
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope, upgrade_database
from models.core.settings import Settings, resolve_secret_key
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user
from testing.slack import Message, SlackServer, buttons, text_of

BOT_TOKEN = "xoxb-1-accessgate-bench"
APP_TOKEN = "xapp-1-A0001-accessgate-bench"
REQUESTER_CHAT_ID = "U0BENCHREQ"
REVIEWER_CHAT_ID = "U0BENCHREV"
REVIEWER_GROUP = "dba"

CHANNELS = 10
CLICK_REVIEWS = 500
BURST_REVIEWS = 1000
CONCURRENCY = 16
# Slack's documented pace for posting into one channel; the bot is left at its default, the same.
SLACK_MESSAGES_PER_SECOND = 1.0
SLACK_BURST = 1

BASELINE_WARMUP_SECONDS = 1.0
BASELINE_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 30.0
# Cards go out at the pace, so waiting for them scales with cards per channel; the margin covers
# the bot starting up and the API opening the reviews.
PACE_MARGIN = 1.5
PACE_SLACK_SECONDS = 30.0
UPDATE_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.2

TARGET_ACK_P99_MS = 100.0
TARGET_UPDATE_P99_MS = 500.0

APPROVE_ACTION = "review.approve"
REVOKE_ACTION = "review.revoke"
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
REVIEW_PAGE_SIZE = 200  # the API's largest page


def connection_name(index: int) -> str:
    return f"db-{index}"


def channel_id(index: int) -> str:
    return f"C0BENCH{index}"


CARD_CHANNELS = frozenset(channel_id(index) for index in range(CHANNELS))


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Latencies:
    """Order statistics of a set of durations, in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> "Latencies":
        ordered = sorted(seconds)
        if not ordered:
            return cls(0, math.nan, math.nan, math.nan)
        return cls(
            count=len(ordered),
            p50_ms=1000 * nearest_rank(ordered, 0.50),
            p99_ms=1000 * nearest_rank(ordered, 0.99),
            max_ms=1000 * ordered[-1],
        )


def nearest_rank(ordered: list[float], fraction: float) -> float:
    """The smallest value with at least ``fraction`` of the values at or below it."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    measurement: str
    per_second: float
    latencies: Latencies
    ratio: float | None
    """p50 relative to the baseline's p50; None where the comparison means nothing."""


@dataclass(frozen=True)
class OpenedReview:
    """A review opened through ``POST /api/sessions``, and when that POST was sent."""

    review_id: str
    channel: str
    sent_at: float


@dataclass(frozen=True)
class Click:
    """One Approve click: when it was handed to the Slack server and how long the ack took."""

    review_id: str
    channel: str
    ts: str
    sent_at: float
    ack_seconds: float | None
    error: str | None = None


@dataclass
class Outcome:
    """Everything measured, and every problem that makes the run fail."""

    rows: list[Row] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def check(self, passed: bool, line: str) -> None:
        """Record a check; a failed one is a problem."""
        self.checks.append(f"{line}: {'OK' if passed else 'FAILED'}")
        if not passed:
            self.problems.append(line)


@dataclass(frozen=True)
class People:
    """Bearer headers of the people acting through the API."""

    admin: dict[str, str]
    requester: dict[str, str]
    reviewer: dict[str, str]


# -- main ---------------------------------------------------------------------------------------


def main() -> int:
    """Run every phase, print and save the report; 1 when a card was lost or a check failed."""
    return run_benchmark("slack", measure_all, needs_wrk=False)


def measure_all() -> tuple[str, bool]:
    """Every phase against one server on SQLite and the Slack-compatible server."""
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
    return render_report(outcome, time.perf_counter() - started), bool(outcome.problems)


@contextmanager
def slack_workspace() -> Iterator[SlackServer]:
    """The Slack-compatible server with the bot's app, both people and Slack's pace enforced."""
    with SlackServer() as slack:
        slack.add_app(bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        slack.add_user(REQUESTER_CHAT_ID, "rita", "rita@example.com", "Rita Requester")
        slack.add_user(REVIEWER_CHAT_ID, "dan", "dan@example.com", "Dan Reviewer")
        slack.pace_channels(SLACK_MESSAGES_PER_SECOND, burst=SLACK_BURST)
        yield slack


def slack_server_env(settings: Settings, slack: SlackServer) -> dict[str, str]:
    """The server's environment, with the bot pointed at the local Slack and its pace default."""
    env = server_env(settings)
    env["ACCESSGATE_SLACK_API_URL"] = slack.base_url
    return env


def create_people(settings: Settings) -> People:
    """The admin, the requester and the reviewer in the database, and their bearer headers."""
    engine = create_db_engine(settings.resolved_database_url())
    try:
        upgrade_database(engine)
        with db_scope(engine) as db:
            upsert_user(db=db, sub=ADMIN_SUB, name="Ada Admin", groups=["admin"])
            upsert_user(
                db=db,
                sub=REQUESTER_SUB,
                name="Rita Requester",
                email="rita@example.com",
                groups=["dev"],
            )
            upsert_user(db=db, sub=REVIEWER_SUB, name="Dan Reviewer", groups=[REVIEWER_GROUP])
    finally:
        engine.dispose()
    return People(
        admin=bearer(settings, ADMIN_SUB),
        requester=bearer(settings, REQUESTER_SUB),
        reviewer=bearer(settings, REVIEWER_SUB),
    )


def bearer(settings: Settings, sub: str) -> dict[str, str]:
    """Authorization headers for ``sub``, signed with the server's key."""
    token = issue_local_token(
        key=resolve_secret_key(settings), sub=sub, now=utc_now(), ttl=timedelta(hours=1)
    )
    return {"Authorization": f"Bearer {token}"}


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


# -- setting the bot up -------------------------------------------------------------------------


def set_up_chat(api: httpx.Client, slack: SlackServer, people: People) -> None:
    """Link both Slack accounts, create the connections and plugins, wait for the bot."""
    link_chat_account(api, people.admin, people.requester, REQUESTER_CHAT_ID)
    link_chat_account(api, people.admin, people.reviewer, REVIEWER_CHAT_ID)
    for index in range(CHANNELS):
        created = api.post(
            "/connections",
            json={"name": connection_name(index), "type": "database"},
            headers=people.admin,
        )
        expect_status(created, 201)
    review_plugin = {
        "name": "review",
        "connections": [
            {"name": connection_name(index), "config": [REVIEWER_GROUP]}
            for index in range(CHANNELS)
        ],
    }
    expect_status(api.post("/plugins", json=review_plugin, headers=people.admin), 201)
    chat_plugin = {
        "name": "chat",
        "connections": [
            {"name": connection_name(index), "config": [channel_id(index)]}
            for index in range(CHANNELS)
        ],
        "config": {"envvars": {"CHAT_BOT_TOKEN": b64(BOT_TOKEN), "CHAT_APP_TOKEN": b64(APP_TOKEN)}},
    }
    expect_status(api.post("/plugins", json=chat_plugin, headers=people.admin), 201)
    wait_until_connected(api, people.admin)
    slack.wait_connected(APP_TOKEN, timeout=CONNECT_TIMEOUT_SECONDS)


def link_chat_account(
    api: httpx.Client, admin: dict[str, str], person: dict[str, str], chat_id: str
) -> None:
    """What an admin does for a user who has not linked their Slack account themselves."""
    me = api.get("/users/me", headers=person)
    expect_status(me, 200)
    patched = api.patch(f"/users/{me.json()['id']}", json={"chat_id": chat_id}, headers=admin)
    expect_status(patched, 200)


def wait_until_connected(api: httpx.Client, admin: dict[str, str]) -> None:
    """Return once the chat plugin's status says connected; raise if it never does."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
    while True:
        status = api.get("/plugins/chat/status", headers=admin).json()
        if status.get("state") == "connected":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the chat bot did not connect: {status}")
        time.sleep(POLL_SECONDS)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def expect_status(response: httpx.Response, status: int) -> None:
    """Setting up must work; a benchmark of a half-configured bot would measure nothing."""
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} answered "
            f"{response.status_code}: {response.text}"
        )


# -- baseline -----------------------------------------------------------------------------------


def measure_baseline(url: str) -> tuple[float, Latencies]:
    """Requests/s and latencies of ``GET url`` from CONCURRENCY threads, after a warm-up."""
    hammer(url, BASELINE_WARMUP_SECONDS)
    durations = hammer(url, BASELINE_SECONDS)
    return len(durations) / BASELINE_SECONDS, Latencies.of(durations)


def hammer(url: str, seconds: float) -> list[float]:
    """GET ``url`` in a loop from CONCURRENCY threads, each with its own keep-alive client."""
    stop_at = time.monotonic() + seconds

    def one_thread(_: int) -> list[float]:
        durations = []
        with httpx.Client(timeout=30) as client:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                client.get(url).raise_for_status()
                durations.append(time.perf_counter() - started)
        return durations

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return [d for durations in pool.map(one_thread, range(CONCURRENCY)) for d in durations]


# -- opening reviews and waiting for their cards ------------------------------------------------


def open_reviews(api_url: str, requester: dict[str, str], count: int) -> list[OpenedReview]:
    """Open ``count`` sessions round-robin over the connections, CONCURRENCY POSTs at a time."""
    local = threading.local()

    def open_one(number: int) -> OpenedReview:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=api_url, timeout=60)
        index = number % CHANNELS
        sent_at = time.monotonic()
        response = local.client.post(
            "/sessions",
            json={"connection": connection_name(index), "script": f"select {number}"},
            headers=requester,
        )
        expect_status(response, 201)
        review = response.json()["review"]
        if review is None or review["status"] != "PENDING":
            raise RuntimeError(f"session {response.json()['id']} got no pending review")
        return OpenedReview(review["id"], channel_id(index), sent_at)

    # Each thread keeps its own client (and its connection) for all its POSTs.
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(open_one, range(count)))


def card_posts(slack: SlackServer) -> int:
    """Cards the Slack server took into the benchmark's channels so far.

    Counted from the call log rather than ``messages()``, which deep-copies every message while
    holding the Slack server's lock and would slow down the very traffic being measured.
    """
    return sum(
        1
        for call in slack.calls_to("chat.postMessage")
        if call.ok and call.params.get("channel") in CARD_CHANNELS
    )


def pace_timeout(cards_per_channel: int) -> float:
    """How long cards at Slack's pace may take, with room to spare."""
    return PACE_MARGIN * cards_per_channel / SLACK_MESSAGES_PER_SECOND + PACE_SLACK_SECONDS


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` outside the Slack server's lock; whether it came true in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True


def cards_by_review(slack: SlackServer, review_ids: set[str]) -> dict[str, list[Message]]:
    """The cards in the benchmark's channels naming each of ``review_ids`` (its id is shown)."""
    found: dict[str, list[Message]] = defaultdict(list)
    for message in slack.messages():
        if message.channel not in CARD_CHANNELS:
            continue
        for review_id in set(UUID_PATTERN.findall(text_of(message))) & review_ids:
            found[review_id].append(message)
    return found


def check_one_card_each(
    phase: str, opened: list[OpenedReview], cards: dict[str, list[Message]], outcome: Outcome
) -> None:
    """Every review has exactly one card, in its own channel: none lost, none duplicated."""
    lost = [review.review_id for review in opened if not cards.get(review.review_id)]
    duplicated = sum(max(0, len(cards.get(review.review_id, [])) - 1) for review in opened)
    misplaced = sum(
        1
        for review in opened
        for card in cards.get(review.review_id, [])
        if card.channel != review.channel
    )
    outcome.check(not lost, f"{phase}: {len(lost)} of {len(opened)} reviews without a card")
    outcome.check(not duplicated, f"{phase}: {duplicated} duplicated cards")
    outcome.check(not misplaced, f"{phase}: {misplaced} cards outside their connection's channel")


# -- clicks -------------------------------------------------------------------------------------


def measure_clicks(
    api: httpx.Client,
    api_url: str,
    slack: SlackServer,
    people: People,
    baseline_p50_ms: float,
    outcome: Outcome,
) -> None:
    """Approve CLICK_REVIEWS cards from Slack, 16 clicks in flight; time acks and card updates."""
    print(f"clicks: opening {CLICK_REVIEWS} reviews...", flush=True)
    opened = open_reviews(api_url, people.requester, CLICK_REVIEWS)
    cards = pending_cards(slack, opened, seconds_since_first_post(opened), outcome)
    print(f"clicks: clicking Approve on {len(cards)} cards...", flush=True)
    started = time.monotonic()
    clicks = click_approve_on_each(slack, cards)
    clicked_in = time.monotonic() - started
    answered = [click for click in clicks if click.ack_seconds is not None]
    failed = [click for click in clicks if click.error is not None]
    outcome.check(not failed, f"clicks: {len(failed)} of {len(clicks)} clicks got no ack")
    outcome.notes += [f"a click failed: {click.error}" for click in failed[:3]]
    clicks_per_second = len(answered) / clicked_in
    acks = Latencies.of([click.ack_seconds for click in answered if click.ack_seconds is not None])
    outcome.rows.append(Row("click → ack", clicks_per_second, acks, acks.p50_ms / baseline_p50_ms))
    print(f"clicks: {len(answered)} acked in {clicked_in:.1f} s; waiting for the cards", flush=True)
    updates = card_update_delays(slack, answered, outcome)
    outcome.rows.append(
        Row("click → card updated", clicks_per_second, updates, updates.p50_ms / baseline_p50_ms)
    )
    check_approved_through_api(api, people.admin, opened, outcome)
    add_latency_targets(acks, updates, outcome)


def pending_cards(
    slack: SlackServer, opened: list[OpenedReview], opened_in: float, outcome: Outcome
) -> list[Message]:
    """Wait for the cards of ``opened`` at Slack's pace; check them and return one per review."""
    wanted = card_posts(slack) + len(opened)
    wait_until(lambda: card_posts(slack) >= wanted, pace_timeout(len(opened) // CHANNELS))
    cards = cards_by_review(slack, {review.review_id for review in opened})
    check_one_card_each("clicks", opened, cards, outcome)
    first_post = min(review.sent_at for review in opened)
    posted = [found[0] for found in cards.values() if found]
    if posted:
        posted_in = max(card.posted_at for card in posted) - first_post
        outcome.phases.append(
            f"clicks: {len(opened)} reviews opened in {opened_in:.1f} s; "
            f"their {len(posted)} cards were all posted {posted_in:.1f} s after the first POST"
        )
    return posted


def seconds_since_first_post(opened: list[OpenedReview]) -> float:
    """From the first POST sent to now (called right after the last one was answered)."""
    return time.monotonic() - min(review.sent_at for review in opened)


def click_approve_on_each(slack: SlackServer, cards: list[Message]) -> list[Click]:
    """Click Approve once on every card as the reviewer, CONCURRENCY clicks in flight."""

    def click(card: Message) -> Click:
        review_id = approve_button_value(card)
        # Taken before handing the click over, so the delay counts the Slack server's share too.
        sent_at = time.monotonic()
        try:
            ack = slack.click(REVIEWER_CHAT_ID, card, APPROVE_ACTION)
        except (TimeoutError, ConnectionError, LookupError) as error:
            return Click(review_id, card.channel, card.ts, sent_at, None, str(error))
        return Click(review_id, card.channel, card.ts, sent_at, ack.elapsed)

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(click, cards))


def approve_button_value(card: Message) -> str:
    """The review id the Approve button carries."""
    return str(next(b["value"] for b in buttons(card) if b["action_id"] == APPROVE_ACTION))


def card_update_delays(slack: SlackServer, clicks: list[Click], outcome: Outcome) -> Latencies:
    """Click to APPROVED card for every click, once every card was rewritten; checks the cards."""
    clicked = {(click.channel, click.ts) for click in clicks}
    # The call log is cheap to read; reading every card would hold the Slack server's lock.
    rewritten = wait_until(
        lambda: clicked <= first_update_times(slack).keys(), UPDATE_TIMEOUT_SECONDS
    )
    outcome.check(rewritten, f"clicks: every card rewritten within {UPDATE_TIMEOUT_SECONDS:.0f} s")
    first_update = first_update_times(slack)
    turned_approved, wrong, rewrites = [], 0, Counter[int]()
    for click in clicks:
        card = slack.message(click.channel, click.ts)
        rewrites[card.update_count] += 1
        if not is_approved_card(card):
            wrong += 1
            continue
        # updated_at is the latest rewrite; the first one is when the reviewer saw it change.
        updated_at = card.updated_at if card.update_count == 1 else first_update[card_key(card)]
        assert updated_at is not None
        turned_approved.append((click.sent_at, updated_at))
    outcome.check(
        not wrong, f"clicks: {wrong} cards not APPROVED with only a Revoke button after the click"
    )
    note_rewrites(rewrites, outcome)
    if turned_approved:
        span = max(at for _, at in turned_approved) - min(click.sent_at for click in clicks)
        outcome.phases.append(
            f"clicks: the last card turned APPROVED {span:.1f} s after the first click "
            f"({len(turned_approved) / span:.0f} cards/s)"
        )
    return Latencies.of([at - sent_at for sent_at, at in turned_approved])


def note_rewrites(rewrites: Counter[int], outcome: Outcome) -> None:
    """One rewrite per decided card is enough; say how many each card got."""
    described = ", ".join(
        f"{cards} cards {times} time(s)" for times, cards in sorted(rewrites.items())
    )
    outcome.notes.append(f"rewrites (chat.update) of each clicked card by the end: {described}")


def first_update_times(slack: SlackServer) -> dict[tuple[str, str], float]:
    """When the Slack server took the first successful chat.update of each message."""
    first: dict[tuple[str, str], float] = {}
    for call in slack.calls_to("chat.update"):
        key = (str(call.params.get("channel")), str(call.params.get("ts")))
        if call.ok and key not in first:
            first[key] = call.time
    return first


def card_key(card: Message) -> tuple[str, str]:
    return card.channel, card.ts


def is_approved_card(card: Message) -> bool:
    """What an approved card shows: APPROVED and nothing left to click but Revoke."""
    return "APPROVED" in text_of(card) and [b["action_id"] for b in buttons(card)] == [
        REVOKE_ACTION
    ]


def check_approved_through_api(
    api: httpx.Client, admin: dict[str, str], opened: list[OpenedReview], outcome: Outcome
) -> None:
    """Every clicked review is APPROVED as the API tells it."""
    approved = approved_review_ids(api, admin)
    missing = [review.review_id for review in opened if review.review_id not in approved]
    outcome.check(
        not missing,
        f"clicks: {len(opened) - len(missing)} of {len(opened)} reviews APPROVED "
        "through GET /api/reviews",
    )


def approved_review_ids(api: httpx.Client, admin: dict[str, str]) -> set[str]:
    """Every APPROVED review, page by page."""
    ids: set[str] = set()
    offset = 0
    while True:
        page = api.get(
            "/reviews",
            params={"status": "APPROVED", "limit": REVIEW_PAGE_SIZE, "offset": offset},
            headers=admin,
        )
        expect_status(page, 200)
        items = page.json()["items"]
        ids.update(item["id"] for item in items)
        if len(items) < REVIEW_PAGE_SIZE:
            return ids
        offset += REVIEW_PAGE_SIZE


def add_latency_targets(acks: Latencies, updates: Latencies, outcome: Outcome) -> None:
    outcome.targets.append(
        target_line("click → ack p99", acks.p99_ms, TARGET_ACK_P99_MS),
    )
    outcome.targets.append(
        target_line("click → card updated p99", updates.p99_ms, TARGET_UPDATE_P99_MS),
    )


def target_line(what: str, value_ms: float, limit_ms: float) -> str:
    met = "met" if value_ms <= limit_ms else "NOT met"
    return f"{what} <= {limit_ms:.0f} ms: {value_ms:.1f} ms ({met})"


# -- burst --------------------------------------------------------------------------------------


def measure_burst(api_url: str, slack: SlackServer, people: People, outcome: Outcome) -> None:
    """Open BURST_REVIEWS reviews at once and time their cards going out at Slack's pace."""
    print(f"burst: opening {BURST_REVIEWS} reviews...", flush=True)
    cards_before = card_posts(slack)
    opened = open_reviews(api_url, people.requester, BURST_REVIEWS)
    opened_in = seconds_since_first_post(opened)
    burst_started = min(review.sent_at for review in opened)
    print(f"burst: opened in {opened_in:.1f} s; waiting for the cards...", flush=True)
    arrived = wait_until(
        lambda: card_posts(slack) >= cards_before + BURST_REVIEWS,
        pace_timeout(BURST_REVIEWS // CHANNELS),
    )
    outcome.check(arrived, "burst: every card arrived before the wait ran out")
    cards = cards_by_review(slack, {review.review_id for review in opened})
    check_one_card_each("burst", opened, cards, outcome)
    delivered = [(review, found[0]) for review in opened if (found := cards.get(review.review_id))]
    if not delivered:
        return
    total = max(card.posted_at for _, card in delivered) - burst_started
    delays = Latencies.of([card.posted_at - review.sent_at for review, card in delivered])
    outcome.rows.append(Row("burst delivery (POST → card)", len(delivered) / total, delays, None))
    describe_burst(opened_in, total, [card for _, card in delivered], outcome)
    check_pacing(slack, burst_started, outcome)


def describe_burst(opened_in: float, total: float, cards: list[Message], outcome: Outcome) -> None:
    """Overall and per-channel delivery rates, and the tightest gap between two cards."""
    by_channel: dict[str, list[float]] = defaultdict(list)
    for card in cards:
        by_channel[card.channel].append(card.posted_at)
    # Cards after the first of a channel over the time they took: the pace the channel saw.
    rates = [
        (len(times) - 1) / (max(times) - min(times))
        for times in by_channel.values()
        if len(times) > 1
    ] or [math.nan]
    gaps = [
        later - earlier
        for times in by_channel.values()
        for earlier, later in pairwise(sorted(times))
    ] or [math.nan]
    outcome.phases.append(
        f"burst: {BURST_REVIEWS} reviews opened in {opened_in:.1f} s "
        f"({BURST_REVIEWS / opened_in:.0f}/s); the last card appeared {total:.1f} s after the "
        f"first POST: {len(cards) / total:.2f} cards/s overall, per channel "
        f"{min(rates):.2f} to {max(rates):.2f} cards/s between its first and last card; "
        f"gaps between cards in a channel {min(gaps):.3f} to {max(gaps):.3f} s"
    )


def check_pacing(slack: SlackServer, burst_started: float, outcome: Outcome) -> None:
    """No card channel ever saw a post beyond Slack's pace; refusals elsewhere are reported."""
    refused = [
        (str(call.params.get("channel")), call.time)
        for call in slack.calls_to("chat.postMessage")
        if call.status == 429
    ]
    in_burst = [channel for channel, at in refused if at >= burst_started]
    outcome.phases.append(
        f"pacing violations (posts the Slack server refused with 429): during the burst "
        f"{describe_refusals(in_burst)}; whole run {describe_refusals([c for c, _ in refused])}"
    )
    in_card_channels = sum(1 for channel, _ in refused if channel in CARD_CHANNELS)
    outcome.check(
        not in_card_channels, f"{in_card_channels} pacing violations in card channels, whole run"
    )


def describe_refusals(channels: list[str]) -> str:
    """How many refusals, how many of them in card channels, and the busiest other channels."""
    in_card_channels = sum(1 for channel in channels if channel in CARD_CHANNELS)
    elsewhere = Counter(channel for channel in channels if channel not in CARD_CHANNELS)
    busiest = ", ".join(f"{channel}: {count}" for channel, count in elsewhere.most_common(3))
    return (
        f"{len(channels)} ({in_card_channels} in card channels"
        + (f"; elsewhere {busiest}" if busiest else "")
        + ")"
    )


def note_direct_messages(slack: SlackServer, outcome: Outcome) -> None:
    """The requester is told of each approval by DM; say how many of them Slack has taken."""
    delivered = len(slack.dms(REQUESTER_CHAT_ID))
    outcome.notes.append(
        f"direct messages to the requester (one per approval) delivered by the end of the run: "
        f"{delivered} of {CLICK_REVIEWS}"
    )


# -- report -------------------------------------------------------------------------------------


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
        f"{utc_now():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, SQLite, {CHANNELS} channels; "
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


if __name__ == "__main__":
    sys.exit(main())
