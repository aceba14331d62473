"""Telling every replica that something it caches changed, through the database they share.

A writer calls ``announce(db, topic)`` inside the transaction that makes the change. On
PostgreSQL that is a ``NOTIFY``, delivered to every listening connection when (and only if) the
transaction commits; ``SignalListener`` is such a connection, one per process, which calls the
topic's handlers from its own thread. On SQLite there is one process, which learns of its own
changes in-process; ``announce`` does nothing there and no listener is started.

Handlers are also called once after the listener (re)connects, since a signal sent while it was
away is lost: a handler re-reads what it caches instead of trusting what it missed.
"""

import logging
import threading
from collections.abc import Callable

import psycopg
from sqlalchemy import Engine, text
from sqlmodel import Session

logger = logging.getLogger("accessgate.signals")

CHANNEL = "accessgate"
RECONNECT_SECONDS = 1.0
WAIT_SECONDS = 1.0  # how often the listener looks up from waiting, to notice it should stop


def announce(db: Session, topic: str) -> None:
    """Tell every replica, when the caller's transaction commits, that ``topic`` changed."""
    if db.get_bind().dialect.name == "postgresql":
        db.connection().execute(
            text("SELECT pg_notify(:channel, :topic)"),
            {
                "channel": CHANNEL,
                "topic": topic,
            },
        )


class SignalListener:
    """One PostgreSQL connection that LISTENs for announcements and calls their handlers."""

    def __init__(self, engine: Engine) -> None:
        # The engine's URL without SQLAlchemy's driver suffix is a libpq URL psycopg takes.
        url = engine.url.set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self._handlers: dict[str, list[Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def on(self, topic: str, handler: Callable[[], None]) -> None:
        """Call ``handler`` (from the listener's thread; keep it quick) on each ``topic``."""
        with self._lock:
            self._handlers.setdefault(topic, []).append(handler)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="signal-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_SECONDS + 1)

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self._call_every_handler()  # whatever changed while nobody listened
                    while not self._stopping.is_set():
                        for notice in connection.notifies(timeout=WAIT_SECONDS):
                            self._call(notice.payload)
            except psycopg.Error as exc:
                logger.warning("lost the database's change signals (%s); reconnecting", exc)
                self._stopping.wait(RECONNECT_SECONDS)

    def _call_every_handler(self) -> None:
        with self._lock:
            topics = list(self._handlers)
        for topic in topics:
            self._call(topic)

    def _call(self, topic: str) -> None:
        with self._lock:
            handlers = list(self._handlers.get(topic, ()))
        for handler in handlers:
            try:
                handler()
            except Exception:
                logger.exception("handling the change signal %r failed", topic)
