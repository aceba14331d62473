"""Work every replica does now and then in the background, whichever replica gets to it first."""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta

from sqlalchemy import Engine

from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.throttle import prune_throttle_counters
from models.delivery.pruning import PRUNE_BATCH, prune_delivered

logger = logging.getLogger("accessgate.housekeeping")

PRUNE_EVERY_SECONDS = 600.0
PAUSE_BETWEEN_BATCHES_SECONDS = 0.1  # let deliverers and decisions in between batches


def prune_outbox(engine: Engine, retention: timedelta, batch: int = PRUNE_BATCH) -> int:
    """Delete every event delivered longer than ``retention`` ago, a batch at a time."""
    pruned = 0
    before = utc_now() - retention
    while True:
        with db_scope(engine) as db:
            deleted = prune_delivered(db=db, before=before, batch=batch)
        pruned += deleted
        if deleted < batch:
            return pruned
        time.sleep(PAUSE_BETWEEN_BATCHES_SECONDS)


async def prune_forever(engine: Engine, retention: timedelta) -> None:
    while True:
        try:
            pruned = await asyncio.to_thread(prune_outbox, engine, retention)
            if pruned:
                logger.info("pruned %d delivered outbox events", pruned)
            await asyncio.to_thread(prune_throttle_counters, engine)
        except Exception:
            logger.exception("pruning failed; trying again later")
        await asyncio.sleep(PRUNE_EVERY_SECONDS)


@contextlib.asynccontextmanager
async def housekeeping(engine: Engine, retention: timedelta) -> AsyncIterator[None]:
    """Run the background work while the block runs."""
    task = asyncio.create_task(prune_forever(engine, retention), name="housekeeping")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
