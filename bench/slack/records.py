"""Constants and records of the Slack bot benchmark: what is measured and how it is kept."""

import math
import re
from dataclasses import dataclass, field

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
