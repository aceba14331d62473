"""The webhooks plugin at work: every replica fans events out and sends due deliveries.

Each delivery is leased by one replica at a time (``models.webhooks.delivery``). Sends run as
tasks of their own, at most ``PER_ENDPOINT`` at once for one endpoint: an endpoint that is slow
or dead holds its own slots only, never another endpoint's, the Slack bot's or the API's.
"""

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import httpx
from sqlalchemy import Engine
from standardwebhooks.webhooks import Webhook

from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.metrics import WEBHOOK_ATTEMPTS
from models.core.sealing import SecretBox
from models.core.settings import Settings
from models.delivery.outbox import on_committed_events
from models.webhooks import delivery as deliveries
from models.webhooks.schema import DeliveryStatus
from models.webhooks.service import open_secret

logger = logging.getLogger("accessgate.webhooks")

POLL_SECONDS = 0.5  # other replicas' events; this process's own wake the sender at once
GATHER_SECONDS = 0.05
# Whether the plugin is installed is read again this often, not every round.
PLUGIN_CHECK_SECONDS = 1.0
PER_ENDPOINT = 16
IN_FLIGHT = 64

USER_AGENT = "accessgate-webhooks"


class WebhookSender:
    def __init__(self, engine: Engine, secret_box: SecretBox, settings: Settings) -> None:
        self._engine = engine
        self._secret_box = secret_box
        self._schedule = settings.retry_waits()
        self._timeout = settings.webhook_timeout_seconds
        # As long as an outbox lease: a replica that dies mid-send leaves it to another then.
        self._lease_period = timedelta(seconds=settings.outbox_lease_seconds)
        self._wake = asyncio.Event()
        self._in_flight: dict[int, deliveries.LeasedDelivery] = {}
        self._finished: list[deliveries.Attempt] = []  # sent, not recorded yet
        self._installed: list[uuid.UUID] = []  # organizations with the plugin, as last read
        self._checked_at = -PLUGIN_CHECK_SECONDS
        self._secrets: dict[tuple[uuid.UUID, str], str] = {}  # opened once per sealed secret
        self._tasks: set[asyncio.Task[None]] = set()

    def _db(self) -> contextlib.AbstractContextManager:  # type: ignore[type-arg]
        return db_scope(self._engine)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        def wake() -> None:  # from the committing thread
            loop.call_soon_threadsafe(self._wake.set)

        remove = on_committed_events(wake)
        try:
            async with httpx.AsyncClient(
                timeout=self._timeout, follow_redirects=False, headers={"User-Agent": USER_AGENT}
            ) as client:
                while True:
                    self._wake.clear()
                    try:
                        await self._round(client)
                    except Exception:
                        logger.exception("webhook delivery round failed; trying again")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
                    # Let what else is ending end too: one round (a few statements) then
                    # serves a burst, instead of a round for every send or decision.
                    await asyncio.sleep(GATHER_SECONDS)
        finally:
            remove()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._finished:  # sent: recorded, not sent again by the next deliverer
                await asyncio.to_thread(self._record, self._finished)
                for attempt in self._finished:
                    self._in_flight.pop(attempt.delivery.id, None)
            leased = list(self._in_flight.values())
            if leased:
                await asyncio.to_thread(self._release, leased)

    def _release(self, leased: list[deliveries.LeasedDelivery]) -> None:
        with self._db() as db:
            deliveries.release(db, leased)

    async def _round(self, client: httpx.AsyncClient) -> None:
        if self._finished:
            finished, self._finished = self._finished, []
            try:
                await asyncio.to_thread(self._record, finished)
            finally:
                # Until recorded, a delivery holds back its review's next one at its endpoint.
                for attempt in finished:
                    self._in_flight.pop(attempt.delivery.id, None)
        organizations = await asyncio.to_thread(self._organizations)
        if not organizations:  # the plugin is not installed: events wait, not lost
            return
        await asyncio.to_thread(self._fan_out, organizations)
        per_endpoint = Counter(leased.endpoint_id for leased in self._in_flight.values())
        busy = [endpoint for endpoint, count in per_endpoint.items() if count >= PER_ENDPOINT]
        room = IN_FLIGHT - len(self._in_flight)
        if room <= 0:
            return
        leased = await asyncio.to_thread(self._lease, organizations, room, busy)
        for delivery in leased:
            if per_endpoint[delivery.endpoint_id] >= PER_ENDPOINT:
                await asyncio.to_thread(self._release, [delivery])  # its turn comes later
                continue
            per_endpoint[delivery.endpoint_id] += 1
            self._in_flight[delivery.id] = delivery
            task = asyncio.create_task(self._send(client, delivery))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _organizations(self) -> list[uuid.UUID]:
        now = time.monotonic()
        if now - self._checked_at >= PLUGIN_CHECK_SECONDS:
            with self._db() as db:
                self._installed = deliveries.organizations_with_webhooks(db)
            self._checked_at = now
        return self._installed

    def _fan_out(self, organizations: list[uuid.UUID]) -> None:
        with self._db() as db:
            while deliveries.fan_out(db, now=utc_now(), organizations=organizations):
                pass

    def _lease(
        self, organizations: list[uuid.UUID], room: int, busy: list[uuid.UUID]
    ) -> list[deliveries.LeasedDelivery]:
        with self._db() as db:
            return deliveries.lease_due(
                db,
                now=utc_now(),
                limit=room,
                lease=self._lease_period,
                organizations=organizations,
                busy_endpoints=busy,
            )

    def _secret(self, delivery: deliveries.LeasedDelivery) -> str:
        key = (delivery.endpoint_id, delivery.sealed_secret)  # a rotated secret is a new key
        if key not in self._secrets:
            self._secrets[key] = open_secret(
                self._secret_box, delivery.endpoint_id, delivery.sealed_secret
            )
        return self._secrets[key]

    async def _send(self, client: httpx.AsyncClient, delivery: deliveries.LeasedDelivery) -> None:
        status_code: int | None = None
        error: str | None = None
        try:
            secret = self._secret(delivery)
            answer = await client.post(
                delivery.url,
                content=delivery.body.encode(),
                headers=signed_headers(secret, delivery.message_id, delivery.body, utc_now()),
            )
            status_code = answer.status_code
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken secret, say: recorded as the attempt's error
            logger.exception("webhook delivery %s could not be sent", delivery.id)
            error = f"{type(exc).__name__}: {exc}"
        self._finished.append(deliveries.Attempt(delivery, status_code, error))
        self._wake.set()  # recorded in the next round, with every other attempt that ended

    def _record(self, finished: list[deliveries.Attempt]) -> None:
        with self._db() as db:
            outcomes = deliveries.record_outcomes(
                db, attempts=finished, now=utc_now(), schedule=self._schedule
            )
        for attempt, outcome in zip(finished, outcomes, strict=True):
            if outcome is None:
                continue  # another replica holds it now
            WEBHOOK_ATTEMPTS.labels(
                "retrying" if outcome == DeliveryStatus.PENDING else outcome
            ).inc()
            logger.info(
                "webhook delivery %s to %s: %s (%s)",
                attempt.delivery.id,
                attempt.delivery.endpoint_id,
                outcome,
                attempt.status_code or attempt.error,
            )


def signed_headers(secret: str, message_id: str, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers: the same webhook-id on every attempt, this attempt's
    timestamp, and the signature of both with the body."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, body),
    }


@contextlib.asynccontextmanager
async def webhook_sender(
    engine: Engine, secret_box: SecretBox, settings: Settings
) -> AsyncIterator[None]:
    """Send webhooks while the block runs (the plugin decides, round by round, if there is
    anything to send)."""
    task = asyncio.create_task(
        WebhookSender(engine, secret_box, settings).run(), name="webhook-sender"
    )
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
