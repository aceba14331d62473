"""The outbox stays small and its queries stay on indexes: delivered events are pruned after
their retention, and deliverers look only at the (partially indexed) undelivered ones."""

from datetime import timedelta

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from api.housekeeping import prune_outbox
from models.chat.messages import CARD_KINDS
from models.core.clock import utc_now
from models.core.db import db_scope
from models.delivery.leases import deliverable_events_query, mark_delivered
from models.delivery.outbox import OutboxEvent
from tests.models.test_chat_delivery import lease, open_reviews

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def count_events(engine) -> dict[str, int]:
    with db_scope(engine) as db:
        delivered = col(OutboxEvent.delivered_at).is_not(None)
        rows = db.exec(select(delivered, func.count()).group_by(delivered)).all()
    return {"delivered" if done else "undelivered": count for done, count in rows}


def test_only_events_delivered_longer_ago_than_the_retention_are_pruned(engine, monkeypatch):
    monkeypatch.setattr("api.housekeeping.PAUSE_BETWEEN_BATCHES_SECONDS", 0)
    open_reviews(engine, 7)
    leased = lease(engine, limit=6)
    week_ago = utc_now() - timedelta(days=7, minutes=1)
    with db_scope(engine) as db:
        for event in leased[:5]:
            mark_delivered(db=db, event=event, now=week_ago)
        mark_delivered(db=db, event=leased[5], now=utc_now())

    assert prune_outbox(engine, timedelta(days=7), batch=2) == 5  # in three transactions
    assert count_events(engine) == {"delivered": 1, "undelivered": 1}
    assert prune_outbox(engine, timedelta(days=7)) == 0


def test_the_lease_query_can_use_the_indexes_of_undelivered_events(engine):
    open_reviews(engine, 3)
    statement = deliverable_events_query(now=utc_now(), limit=100, kinds=CARD_KINDS)
    with db_scope(engine) as db:
        dialect = db.get_bind().dialect
        sql = str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        if dialect.name == "postgresql":  # a three-row table is scanned unless scans cost more
            db.connection().exec_driver_sql("SET enable_seqscan = off")
        explain = "EXPLAIN QUERY PLAN " if dialect.name == "sqlite" else "EXPLAIN "
        plan = "\n".join(str(row) for row in db.connection().exec_driver_sql(explain + sql))

    # The backlog is found through an index on delivered_at IS NULL, never a table scan; an
    # older event of the same review through the partial (review, id) index.
    assert "SCAN outbox_event" not in plan, plan  # SQLite
    assert "Seq Scan" not in plan, plan  # PostgreSQL
    assert "ix_outbox_event_undelivered_review" in plan, plan
