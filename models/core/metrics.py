"""Counters the domain and the bot move; read at ``GET /metrics`` with what is measured there.

One process serves one replica (a single uvicorn worker), so the default registry of the
process is the replica's: Prometheus scrapes each replica, and sums them.
"""

from prometheus_client import Counter, Histogram

DECISIONS = Counter(
    "accessgate_decisions_total",
    "Decisions accepted on reviews, by door and outcome (the review's status after them).",
    ["door", "outcome"],
)
SLACK_CALLS = Counter(
    "accessgate_slack_api_calls_total",
    "Slack Web API calls by method and answer (HTTP status, or 'error' without one).",
    ["method", "status"],
)
SLACK_RATE_LIMITED = Counter(
    "accessgate_slack_rate_limited_total",
    "Slack Web API calls answered 429, by method.",
    ["method"],
)
WEBHOOK_ATTEMPTS = Counter(
    "accessgate_webhook_deliveries_total",
    "Webhook delivery attempts by outcome: delivered, retrying, failed.",
    ["outcome"],
)
SCHEDULER_FIRED = Counter(
    "accessgate_scheduler_fired_total", "Time rules fired, by rule.", ["rule"]
)
HTTP_REQUESTS = Counter(
    "accessgate_http_requests_total",
    "HTTP requests by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_LATENCY = Histogram(
    "accessgate_http_request_duration_seconds",
    "HTTP request latency by route template and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
