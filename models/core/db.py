"""The one engine factory, column types shared by the tables, and schema migrations."""

import contextlib
import enum
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Engine, Select, Table, event
from sqlalchemy import Enum as SAEnum
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.types import TypeDecorator
from sqlmodel import Session, SQLModel, create_engine

from models.core import errors

MIGRATIONS_DIR = Path(__file__).parent.parent / "migrations"

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_OPTION = "accessgate_write"
WRITER_GATE_HELD = "accessgate_writer_gate_held"
WRITE_STATEMENTS = ("INSERT", "UPDATE", "DELETE")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores it naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use models.core.clock.utc_now()")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def table_of(model: type[SQLModel]) -> Table:
    """The Core table of a table model, for prebuilt statements on hot paths."""
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def new_id() -> uuid.UUID:
    """Return a fresh random identifier for a row."""
    return uuid.uuid4()


def create_db_engine(url: str) -> Engine:
    """Create the engine for ``url``, tuned for its backend."""
    if make_url(url).get_backend_name() == "sqlite":
        return _create_sqlite_engine(url)
    # No pre-ping: it costs a round trip per transaction; recycling bounds how stale a pooled
    # connection can get, and a request on a dead one fails once and is not retried silently.
    return create_engine(url, pool_size=20, max_overflow=20, pool_recycle=1800)


def _create_private_file(path: Path) -> None:
    """Create the database file (and its directory) readable by this user only.

    SQLite gives the ``-wal`` and ``-shm`` files it creates the database file's mode, so they
    are private too: they hold the same scripts, e-mail addresses and reasons.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _create_sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        _create_private_file(Path(database))
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        pool_size=20,
        max_overflow=20,
    )

    @event.listens_for(engine, "connect")
    def configure_connection(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    # SQLite allows one writer at a time, and a transaction that has read cannot upgrade to a
    # writer once another writer committed (SQLITE_BUSY at once, no waiting). So transactions
    # that will write start as writers (BEGIN IMMEDIATE, queueing on busy_timeout), and reads
    # stay deferred: in WAL mode they never block or wait, whatever a request holds meanwhile.
    #
    # Writers of this process first queue on a lock of their own: SQLite's busy handler polls
    # with sleeps of up to 100 ms, so under contention some writers would lose round after round
    # (seconds of latency); the lock hands over as soon as the previous writer's connection is
    # returned. Other processes sharing the file still meet busy_timeout.
    writer_gate = threading.Lock()

    @event.listens_for(engine, "begin")
    def begin(connection: Any) -> None:
        if not connection.get_execution_options().get(WRITE_OPTION, False):
            connection.exec_driver_sql("BEGIN")
            return
        if not writer_gate.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            raise TimeoutError("no turn to write to the SQLite database within busy_timeout")
        connection.connection.info[WRITER_GATE_HELD] = True
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    @event.listens_for(engine.pool, "checkin")
    def open_writer_gate(_dbapi_connection: Any, record: Any) -> None:
        # A writing transaction ends (commit or rollback) before its connection returns here.
        if record.info.pop(WRITER_GATE_HELD, False):
            writer_gate.release()

    @event.listens_for(engine, "before_cursor_execute")
    def refuse_writes_outside_write_transactions(
        connection: Any, _cursor: Any, statement: str, *_args: Any
    ) -> None:
        if statement.lstrip()[:6].upper() in WRITE_STATEMENTS and not (
            connection.get_execution_options().get(WRITE_OPTION, False)
        ):
            raise RuntimeError(
                "a write outside write_transaction(): it could fail with SQLITE_BUSY"
            )

    return engine


@contextmanager
def db_scope(engine: Engine) -> Iterator[Session]:
    """Yield a session whose objects stay readable after commit; roll back on error."""
    with Session(engine, expire_on_commit=False) as db:
        try:
            yield db
        except BaseException:
            db.rollback()
            raise


@contextmanager
def write_transaction(db: Session) -> Iterator[None]:
    """Run the block as one writing transaction: committed at its end, rolled back on error.

    Every service that writes runs inside one, so no transaction, and no lock, outlives the
    service call: on SQLite nothing holds the write lock while its request waits for a worker
    thread. On SQLite any read transaction still open (the caller's authentication, say) is
    ended first and the new one takes the write lock at once; on PostgreSQL row locks do the
    serializing and an open transaction simply goes on (no extra round trips).
    """
    if db.new or db.dirty or db.deleted:
        raise RuntimeError("write_transaction() with unflushed changes would commit them")
    if db.get_bind().dialect.name == "sqlite":
        if db.in_transaction():
            db.commit()
        db.connection(execution_options={WRITE_OPTION: True})
    try:
        yield
        db.commit()
    except BaseException:
        db.rollback()
        raise


def finds_any(db: Session, statement: Select[Any]) -> bool:
    """Whether ``statement`` finds a row, looked for before taking SQLite's write lock (which
    every decision waits for): background work that finds nothing due (the common case) then
    takes no lock. On PostgreSQL, True: the claim itself skips what is locked, at no such cost.
    """
    if db.get_bind().dialect.name == "postgresql":
        return True
    found = db.execute(statement.limit(1)).first() is not None
    db.rollback()  # end the read transaction: SQLite readers pin the WAL
    return found


def flush_or_conflict(db: Session, conflict: str) -> None:
    """Flush pending rows; a unique constraint they violate becomes ``Conflict(conflict)``.

    Called inside ``write_transaction()``, which rolls the transaction back as the error leaves.
    """
    try:
        db.flush()
    except IntegrityError as exc:
        raise errors.Conflict(conflict) from exc


def conflict_aware_insert(db: Session, table: Any) -> Any:
    """``INSERT`` for ``table`` in the session's dialect, with its ``ON CONFLICT`` clauses."""
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def insert_unless_present(db: Session, table: type[SQLModel], *, key: str, **values: Any) -> bool:
    """INSERT a row unless one with the same ``key`` exists; True when this one went in.

    Race-safe on both backends (``ON CONFLICT DO NOTHING``): of processes inserting the same key
    at once, exactly one gets True. RETURNING says it, as psycopg reports no rowcount here.
    """
    statement = (
        conflict_aware_insert(db, table)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[key])
        .returning(getattr(table, key))
    )
    return db.connection().execute(statement).first() is not None


def upsert(db: Session, table: type[SQLModel], *, key: str, **values: Any) -> None:
    """INSERT a row, or UPDATE the given ``values`` of the one with the same ``key``, atomically."""
    insert = conflict_aware_insert(db, table).values(**values)
    changes = {name: insert.excluded[name] for name in values if name != key}
    db.connection().execute(insert.on_conflict_do_update(index_elements=[key], set_=changes))


def upgrade_database(engine: Engine) -> None:
    """Bring the schema to the newest migration (safe to run from several processes at once)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        if connection.dialect.name == "postgresql":
            # Processes starting together take turns; the lock ends with the transaction.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7310541)")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def enum_column(enum_class: type[enum.StrEnum]) -> SAEnum:
    """Store a StrEnum by its value in a plain VARCHAR, so adding a member needs no DDL."""
    return SAEnum(
        enum_class,
        native_enum=False,
        length=32,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )
