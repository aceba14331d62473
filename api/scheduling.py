"""The scheduler's loop: every replica looks for due rules now and then; each due row is
claimed by one of them (``models.scheduler.rules``)."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from sqlalchemy import Engine

from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.metrics import SCHEDULER_FIRED
from models.reviews.timing import ReviewTiming
from models.scheduler.rules import Fired, run_due_rules

logger = logging.getLogger("accessgate.scheduler")


def run_due_now(engine: Engine, timing: ReviewTiming) -> Fired:
    with db_scope(engine) as db:
        return run_due_rules(db, now=utc_now(), timing=timing)


async def schedule_forever(engine: Engine, timing: ReviewTiming, interval: float) -> None:
    while True:
        try:
            fired = await asyncio.to_thread(run_due_now, engine, timing)
            for rule in ("expired", "reminded", "digests", "access_ended"):
                SCHEDULER_FIRED.labels(rule).inc(getattr(fired, rule))
            if fired.total:
                logger.info(
                    "scheduler: %d expired, %d reminded, %d digests, %d access ends",
                    fired.expired,
                    fired.reminded,
                    fired.digests,
                    fired.access_ended,
                )
        except Exception:
            logger.exception("the scheduler's run failed; trying again")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def scheduler(engine: Engine, timing: ReviewTiming, interval: float) -> AsyncIterator[None]:
    """Run the scheduler while the block runs."""
    task = asyncio.create_task(schedule_forever(engine, timing, interval), name="scheduler")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
