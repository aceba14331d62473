"""SQLite transactions: reads never block, writes start as writers, and nothing else writes."""

import pytest
from sqlmodel import select

from models.db import begin_write, session_scope
from models.users import Organization, User


def test_a_write_outside_begin_write_is_refused_on_sqlite(engine):
    with session_scope(engine) as session:
        organization = session.exec(select(Organization)).one()
        session.add(User(sub="sneaky", organization_id=organization.id))

        with pytest.raises(RuntimeError, match="begin_write"):
            session.flush()


def test_an_open_read_does_not_block_a_writer(engine):
    with session_scope(engine) as reader, session_scope(engine) as writer:
        organization = reader.exec(select(Organization)).one()  # read transaction stays open

        begin_write(writer)
        writer.add(User(sub="new", organization_id=organization.id))
        writer.commit()

        # The reader's snapshot predates the write; a new transaction sees it.
        assert reader.exec(select(User).where(User.sub == "new")).first() is None
        reader.commit()
        assert reader.exec(select(User).where(User.sub == "new")).first() is not None


def test_begin_write_refuses_to_commit_pending_changes(engine):
    with session_scope(engine) as session:
        organization = session.exec(select(Organization)).one()
        session.add(User(sub="pending", organization_id=organization.id))

        with pytest.raises(RuntimeError, match="unflushed"):
            begin_write(session)
