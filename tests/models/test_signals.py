"""Change signals between replicas: a NOTIFY sent with the change's transaction reaches every
listening process when (and only if) the transaction commits."""

import threading

import pytest
from sqlmodel import Session

from models.core.db import db_scope, write_transaction
from models.core.signals import SignalListener, announce

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


@pytest.fixture
def heard(engine):
    """Set each time the listener hears "plugin:chat"; already heard once on connecting."""
    event = threading.Event()
    listener = SignalListener(engine)
    listener.on("plugin:chat", event.set)
    listener.start()
    assert event.wait(5), "a listener re-reads everything once connected (signals it missed)"
    event.clear()
    yield event
    listener.stop()


def change(db: Session, topic: str, *, commit: bool) -> None:
    try:
        with write_transaction(db):
            announce(db, topic)
            if not commit:
                raise RuntimeError("the change fails")
    except RuntimeError:
        pass


def test_a_committed_change_is_heard(engine, heard):
    with db_scope(engine) as db:
        change(db, "plugin:chat", commit=True)

    assert heard.wait(2)


def test_a_rolled_back_change_and_other_topics_are_not(engine, heard):
    with db_scope(engine) as db:
        change(db, "plugin:chat", commit=False)
        change(db, "plugin:webhooks", commit=True)

    assert not heard.wait(0.5)
