"""The measured phases: the baseline, clicks on cards, and a burst of new reviews."""

import math
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import httpx

from bench.slack.bot_setup import expect_status
from bench.slack.cards import (
    card_posts,
    cards_by_review,
    check_one_card_each,
    open_reviews,
    pace_timeout,
    wait_until,
)
from bench.slack.records import (
    APPROVE_ACTION,
    BASELINE_SECONDS,
    BASELINE_WARMUP_SECONDS,
    BURST_REVIEWS,
    CARD_CHANNELS,
    CHANNELS,
    CLICK_REVIEWS,
    CONCURRENCY,
    REQUESTER_CHAT_ID,
    REVIEW_PAGE_SIZE,
    REVIEWER_CHAT_ID,
    REVOKE_ACTION,
    TARGET_ACK_P99_MS,
    TARGET_UPDATE_P99_MS,
    UPDATE_TIMEOUT_SECONDS,
    Click,
    Latencies,
    OpenedReview,
    Outcome,
    People,
    Row,
)
from testing.slack import Message, SlackServer, buttons, text_of


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
    params: dict[str, str | int] = {"status": "APPROVED", "limit": REVIEW_PAGE_SIZE}
    while True:
        page = api.get("/reviews", params=params, headers=admin)
        expect_status(page, 200)
        body = page.json()
        ids.update(item["id"] for item in body["items"])
        if body["next_cursor"] is None:
            return ids
        params["cursor"] = body["next_cursor"]


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


def measure_burst(
    api_url: str | list[str],
    slack: SlackServer,
    people: People,
    outcome: Outcome,
    *,
    name: str = "burst",
    reviews: int = BURST_REVIEWS,
    channels: int = CHANNELS,
    refusals_allowed: int = 0,
    goal_seconds: float | None = None,
) -> None:
    """Open ``reviews`` reviews at once over ``channels`` channels and time their cards going
    out at Slack's pace."""
    print(f"{name}: opening {reviews} reviews...", flush=True)
    cards_before = card_posts(slack)
    opened = open_reviews(api_url, people.requester, reviews, channels)
    opened_in = seconds_since_first_post(opened)
    burst_started = min(review.sent_at for review in opened)
    print(f"{name}: opened in {opened_in:.1f} s; waiting for the cards...", flush=True)
    arrived = wait_until(
        lambda: card_posts(slack) >= cards_before + reviews,
        pace_timeout(reviews // channels),
    )
    outcome.check(arrived, f"{name}: every card arrived before the wait ran out")
    cards = cards_by_review(slack, {review.review_id for review in opened})
    check_one_card_each(name, opened, cards, outcome)
    delivered = [(review, found[0]) for review in opened if (found := cards.get(review.review_id))]
    if not delivered:
        return
    total = max(card.posted_at for _, card in delivered) - burst_started
    delays = Latencies.of([card.posted_at - review.sent_at for review, card in delivered])
    outcome.rows.append(Row(f"{name} (POST → card)", len(delivered) / total, delays, None))
    describe_burst(name, reviews, opened_in, total, [card for _, card in delivered], outcome)
    check_pacing(name, slack, burst_started, refusals_allowed, outcome)
    if goal_seconds is not None:
        outcome.targets.append(
            f"{name}: last card <= {goal_seconds:.0f} s after the first POST: {total:.1f} s "
            f"({'met' if total <= goal_seconds else 'NOT met'})"
        )


def describe_burst(
    name: str, reviews: int, opened_in: float, total: float, cards: list[Message], outcome: Outcome
) -> None:
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
        f"{name}: {reviews} reviews opened in {opened_in:.1f} s "
        f"({reviews / opened_in:.0f}/s); the last card appeared {total:.1f} s after the "
        f"first POST: {len(cards) / total:.2f} cards/s overall, per channel "
        f"{min(rates):.2f} to {max(rates):.2f} cards/s between its first and last card; "
        f"gaps between cards in a channel {min(gaps):.3f} to {max(gaps):.3f} s"
    )


def check_pacing(
    name: str, slack: SlackServer, burst_started: float, allowed: int, outcome: Outcome
) -> None:
    """Card channels saw at most ``allowed`` posts beyond Slack's pace during the burst (the
    Slack server refused them with 429); refusals elsewhere are reported."""
    refused = [
        (str(call.params.get("channel")), call.time)
        for call in slack.calls_to("chat.postMessage")
        if call.status == 429
    ]
    in_burst = [channel for channel, at in refused if at >= burst_started]
    outcome.phases.append(
        f"{name}: pacing violations (posts the Slack server refused with 429) "
        f"{describe_refusals(in_burst)}; whole run so far "
        f"{describe_refusals([c for c, _ in refused])}"
    )
    in_card_channels = sum(1 for channel in in_burst if channel in CARD_CHANNELS)
    outcome.check(
        in_card_channels <= allowed,
        f"{name}: {in_card_channels} pacing violations in card channels (at most {allowed})",
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
