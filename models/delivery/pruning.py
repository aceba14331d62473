"""Delivered outbox events are kept for a while (an admin may look at what failed), then pruned.

Pruning deletes a bounded batch per transaction, so it never holds a long lock on a table the
deliverers and every decision write to; several replicas pruning at once skip each other's rows.
"""

from datetime import datetime

from sqlalchemy import delete
from sqlmodel import Session, col, select

from models.core.db import write_transaction
from models.delivery.outbox import OutboxEvent

PRUNE_BATCH = 250  # a few milliseconds of deleting per transaction


def prune_delivered(*, db: Session, before: datetime, batch: int = PRUNE_BATCH) -> int:
    """Delete up to ``batch`` events delivered before ``before``; return how many went."""
    with write_transaction(db):
        doomed = (
            select(OutboxEvent.id)
            .where(col(OutboxEvent.delivered_at) < before)
            .limit(batch)
            .with_for_update(skip_locked=True)
        )
        ids = list(db.exec(doomed))
        if ids:
            db.connection().execute(delete(OutboxEvent).where(col(OutboxEvent.id).in_(ids)))
    return len(ids)
