"""SQLite transactions: reads never block, writes start as writers, and nothing else writes."""

import pytest
from sqlmodel import select

from models.core.db import db_scope, write_transaction
from models.users.schema import Organization, User


def test_a_write_outside_write_transaction_is_refused_on_sqlite(engine):
    with db_scope(engine) as db:
        organization = db.exec(select(Organization)).one()
        db.add(User(sub="sneaky", organization_id=organization.id))

        with pytest.raises(RuntimeError, match="write_transaction"):
            db.flush()


def test_an_open_read_does_not_block_a_writer(engine):
    with db_scope(engine) as reader, db_scope(engine) as writer:
        organization = reader.exec(select(Organization)).one()  # read transaction stays open

        with write_transaction(writer):
            writer.add(User(sub="new", organization_id=organization.id))

        # The reader's snapshot predates the write; a new transaction sees it.
        assert reader.exec(select(User).where(User.sub == "new")).first() is None
        reader.commit()
        assert reader.exec(select(User).where(User.sub == "new")).first() is not None


def test_write_transaction_refuses_to_commit_pending_changes(engine):
    with db_scope(engine) as db:
        organization = db.exec(select(Organization)).one()
        db.add(User(sub="pending", organization_id=organization.id))

        with pytest.raises(RuntimeError, match="unflushed"), write_transaction(db):
            pass


def test_an_error_inside_a_write_transaction_rolls_back_and_frees_the_lock(engine):
    with db_scope(engine) as db:
        organization_id = db.exec(select(Organization.id)).one()

        def add_then_fail() -> None:
            with write_transaction(db):
                db.add(User(sub="half-done", organization_id=organization_id))
                db.flush()
                raise ValueError("refused")

        with pytest.raises(ValueError, match="refused"):
            add_then_fail()
        assert not db.in_transaction()

    with db_scope(engine) as other, write_transaction(other):
        other.add(User(sub="next", organization_id=organization_id))
    with db_scope(engine) as reader:
        subs = set(reader.exec(select(User.sub)))
    assert "next" in subs
    assert "half-done" not in subs
