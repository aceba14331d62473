"""Opening reviews through the API and waiting for their cards, one per review."""

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.slack.bot_setup import expect_status
from bench.slack.records import (
    CARD_CHANNELS,
    CHANNELS,
    CONCURRENCY,
    PACE_MARGIN,
    PACE_SLACK_SECONDS,
    POLL_SECONDS,
    SLACK_MESSAGES_PER_SECOND,
    UUID_PATTERN,
    OpenedReview,
    Outcome,
    channel_id,
    connection_name,
)
from testing.slack import Message, SlackServer, text_of


def open_reviews(
    api_url: str | list[str], requester: dict[str, str], count: int, channels: int = CHANNELS
) -> list[OpenedReview]:
    """Open ``count`` sessions round-robin over the first ``channels`` connections (and over
    the replicas, given several API URLs, as a load balancer would), CONCURRENCY at a time."""
    api_urls = [api_url] if isinstance(api_url, str) else api_url
    local = threading.local()

    def open_one(number: int) -> OpenedReview:
        if not hasattr(local, "clients"):
            # Idle connections are dropped before the server's 5 s keep-alive ends: a POST on a
            # connection the server is closing would fail without being answered.
            limits = httpx.Limits(keepalive_expiry=2.0)
            local.clients = [
                httpx.Client(base_url=url, timeout=60, limits=limits) for url in api_urls
            ]
        index = number % channels
        sent_at = time.monotonic()
        response = local.clients[number % len(api_urls)].post(
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
    """Cards in the benchmark's channels so far (posted, and not deleted as surplus).

    Counted from the call log rather than ``messages()``, which deep-copies every message while
    holding the Slack server's lock and would slow down the very traffic being measured.
    """
    posted = sum(
        1
        for call in slack.calls_to("chat.postMessage")
        if call.ok and call.params.get("channel") in CARD_CHANNELS
    )
    # A surplus card (two deliverers posted one review's card) is deleted: it is no card.
    deleted = sum(
        1
        for call in slack.calls_to("chat.delete")
        if call.ok and call.params.get("channel") in CARD_CHANNELS
    )
    return posted - deleted


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
