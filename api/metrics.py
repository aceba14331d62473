"""``GET /metrics`` in the Prometheus text format, and the middleware that times requests.

Counters kept in the process (``models.core.metrics``) are joined at scrape time by what the
database says for the whole cluster: the outbox and webhook backlogs and their oldest item's
age, and how late the scheduler runs; and by this replica's chat bot state.
"""

import hmac
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func
from sqlalchemy import select as core_select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from models.chat.messages import CARD_KINDS, DIRECT_MESSAGE_KINDS
from models.chat.runtime import ChatState
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope, table_of
from models.core.metrics import HTTP_LATENCY, HTTP_REQUESTS
from models.delivery.outbox import OutboxEvent
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review, ReviewType
from models.users.schema import User
from models.webhooks.schema import DeliveryStatus, WebhookDelivery, WebhookEvent

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Every metric; behind ``ACCESSGATE_METRICS_TOKEN`` as a bearer token when it is set."""
    token = request.app.state.settings.metrics_token
    if token:
        sent = request.headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            raise errors.Unauthenticated("send Authorization: Bearer <ACCESSGATE_METRICS_TOKEN>")
    registry: CollectorRegistry = request.app.state.metrics_registry
    body = generate_latest(REGISTRY) + generate_latest(registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


class ClusterCollector(Collector):
    """What the database says at scrape time, and this replica's chat bot state."""

    def __init__(self, engine: Engine, chat: Any) -> None:
        self._engine = engine
        self._chat = chat

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = utc_now()
        backlog = GaugeMetricFamily(
            "accessgate_outbox_backlog", "Undelivered events, by consumer.", labels=["consumer"]
        )
        oldest = GaugeMetricFamily(
            "accessgate_outbox_oldest_undelivered_seconds",
            "Age of the oldest undelivered event, by consumer (0 when none).",
            labels=["consumer"],
        )
        lag = GaugeMetricFamily(
            "accessgate_scheduler_lag_seconds",
            "How long the most overdue time rule has been due and not fired, by rule.",
            labels=["rule"],
        )
        with db_scope(self._engine) as db:
            outbox = table_of(OutboxEvent)
            for consumer, kinds in (("chat_cards", CARD_KINDS), ("chat_dms", DIRECT_MESSAGE_KINDS)):
                count, first = db.execute(
                    core_select(func.count(), func.min(outbox.c.created_at)).where(
                        outbox.c.delivered_at.is_(None), outbox.c.kind.in_(kinds)
                    )
                ).one()
                backlog.add_metric([consumer], count)
                oldest.add_metric([consumer], _age(now, first))
            events = table_of(WebhookEvent)
            count, first = db.execute(
                core_select(func.count(), func.min(events.c.created_at)).where(
                    events.c.fanned_out.is_(False)
                )
            ).one()
            deliveries = table_of(WebhookDelivery)
            pending, first_pending = db.execute(
                core_select(func.count(), func.min(deliveries.c.event_at)).where(
                    deliveries.c.status == DeliveryStatus.PENDING.value
                )
            ).one()
            backlog.add_metric(["webhooks"], count + pending)
            oldest.add_metric(["webhooks"], max(_age(now, first), _age(now, first_pending)))
            review, users = table_of(Review), table_of(User)
            for rule, column, condition in (
                ("expiry", review.c.expires_at, review.c.status == ReviewStatus.PENDING),
                ("reminders", review.c.next_reminder_at, review.c.status == ReviewStatus.PENDING),
                ("digests", users.c.digest_due_at, users.c.digest_due_at.is_not(None)),
                (
                    "access_ends",
                    review.c.revoke_at,
                    (review.c.status == ReviewStatus.APPROVED)
                    & review.c.access_end_told.is_(False)
                    & (review.c.type == ReviewType.JIT),
                ),
            ):
                due = db.execute(
                    core_select(func.min(column)).where(condition, column <= now)
                ).scalar()
                lag.add_metric([rule], _age(now, due))
        yield backlog
        yield oldest
        yield lag
        state = GaugeMetricFamily(
            "accessgate_chat_connection_state",
            "This replica's Slack bot: 1 for its current state.",
            labels=["state"],
        )
        current = None if self._chat is None else self._chat.status().state
        for each in ChatState:
            state.add_metric([each.value], 1.0 if each == current else 0.0)
        yield state


def _age(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max((now - then).total_seconds(), 0.0)


class RequestMetrics:
    """Counts and times every request by its route template (``/api/reviews/{review_id}``):
    ids never become labels. Requests that match no route are counted as ``unmatched``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            template = route_template(scope)
            method = scope["method"]
            HTTP_REQUESTS.labels(template, method, str(status)).inc()
            HTTP_LATENCY.labels(template, method).observe(time.perf_counter() - started)


def route_template(scope: Scope) -> str:
    """The template of the route that answered, with its routers' prefixes (``/api``).

    Routers keep their prefix to themselves: the route knows only its own part, so the prefix
    is what the request's path has before the part the route matched.
    """
    route = scope.get("route")
    own = str(getattr(route, "path_format", None) or getattr(route, "path", None) or "")
    if not own:
        return "unmatched"
    path = str(scope.get("path", ""))
    try:
        matched = own.format(**{k: str(v) for k, v in scope.get("path_params", {}).items()})
    except (KeyError, IndexError, ValueError):
        return own
    prefix = path[: -len(matched)] if matched and path.endswith(matched) else ""
    return prefix + own
