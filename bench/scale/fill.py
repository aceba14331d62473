"""Fill a migrated database with an organization's year of reviews, in bulk.

Rows are written straight into the tables (COPY on PostgreSQL, one prepared executemany per
chunk on SQLite), not through the API: the point is the size of the tables, made in minutes.
Every column is given, already in the text form both backends store or parse (32-digit hex
ids, ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC times, 0/1 booleans, JSON text), so the server reads
the rows as its own.
"""

import queue
import random
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text
from sqlmodel import SQLModel, select

from bench.harness import CONNECTION_NAME
from models.connections.schema import Connection
from models.core.db import db_scope, table_of
from models.delivery.outbox import OutboxEvent
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review, ReviewGroup
from models.sessions.schema import GatewaySession
from models.users.schema import Organization

REVIEWS = 1_000_000
USERS = 1_000
GROUPS = 50
UNDELIVERED_EVENTS = 100_000
SPAN = timedelta(days=365)
CHUNK = 20_000
SQLITE_FILL_CACHE_KIB = 512 * 1024
# How SQLAlchemy stores a datetime in SQLite; the keyset comparisons compare these strings.
SQLITE_DATETIME = "%Y-%m-%d %H:%M:%S.%f"

# How reviews end, and how many reviewer groups they wait on: a busy organization's year.
STATUS_MIX = {
    ReviewStatus.PENDING: 0.05,
    ReviewStatus.APPROVED: 0.25,
    ReviewStatus.EXECUTED: 0.45,
    ReviewStatus.REJECTED: 0.15,
    ReviewStatus.REVOKED: 0.10,
}
GROUPS_PER_REVIEW = {1: 0.5, 2: 0.35, 3: 0.15}
ONE_TIME = "onetime"
DURATION_NS = 1_800_000_000_000

Row = tuple[str | int | None, ...]

USER_COLUMNS = ("id", "organization_id", "sub", "email", "name", "groups", "status", "created_at")
SESSION_COLUMNS = (
    "id",
    "organization_id",
    "owner_id",
    "connection_id",
    "connection_name",
    "script",
    "type",
    "access_duration",
    "created_at",
    "executed_at",
)
REVIEW_COLUMNS = (
    "id",
    "organization_id",
    "session_id",
    "owner_id",
    "connection_name",
    "type",
    "status",
    "force_approval_groups",
    "distinct_approvers",
    "no_self_force_approval",
    "access_duration",
    "rejection_reason",
    "created_at",
    "revoke_at",
    "ended_at",
)
ENTRY_COLUMNS = (
    "id",
    "review_id",
    "organization_id",
    "review_created_at",
    "review_status",
    "group",
    "status",
    "reviewed_by_id",
    "review_date",
    "forced_review",
)
EVENT_COLUMNS = ("kind", "review_id", "payload", "created_at", "attempts")


def group_name(number: int) -> str:
    return f"team-{number:02d}"


@dataclass
class Filled:
    """What the benchmark needs to know of what was written."""

    pending: list[tuple[uuid.UUID, list[str]]] = field(default_factory=list)
    """Every PENDING review with the groups still to decide it."""


def fill(engine: Engine, *, reviews: int = REVIEWS, seed: int = 7) -> Filled:
    """Write the users, ``reviews`` sessions and reviews with their groups, and the backlog."""
    with db_scope(engine) as db:
        organization_id = db.exec(select(Organization.id)).one()
        connection_id = db.exec(
            select(Connection.id).where(Connection.name == CONNECTION_NAME)
        ).one()
    maker = RowMaker(random.Random(seed), organization_id, sqlite=engine.dialect.name == "sqlite")
    writer = BulkWriter(engine)
    writer.write("user", USER_COLUMNS, maker.users())
    with indexes_built_afterwards(engine, FILLED_TABLES):
        for sessions, made, entries in _made_ahead(maker, connection_id.hex, reviews):
            writer.write("gateway_session", SESSION_COLUMNS, sessions)
            writer.write("review", REVIEW_COLUMNS, made)
            writer.write("review_group", ENTRY_COLUMNS, entries)
        writer.write("outbox_event", EVENT_COLUMNS, maker.backlog())
    with engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return Filled(pending=maker.pending)


Chunk = tuple[list[Row], list[Row], list[Row]]


def _made_ahead(maker: "RowMaker", connection_id: str, total: int) -> Iterator[Chunk]:
    """The chunks of rows, made by a thread of their own while the last chunk is written.

    The database drivers let go of the GIL while they write, so making and writing overlap.
    """
    chunks: queue.Queue[Chunk | None] = queue.Queue(maxsize=2)
    failed: list[BaseException] = []

    def make() -> None:
        try:
            for _ in range(0, total, CHUNK):
                sessions: list[Row] = []
                made: list[Row] = []
                entries: list[Row] = []
                for session, review, its_entries in maker.reviews(connection_id, total, CHUNK):
                    sessions.append(session)
                    made.append(review)
                    entries += its_entries
                chunks.put((sessions, made, entries))
        except BaseException as exc:
            failed.append(exc)
        finally:
            chunks.put(None)

    maker_thread = threading.Thread(target=make, name="fill-maker", daemon=True)
    maker_thread.start()
    while (chunk := chunks.get()) is not None:
        yield chunk
    maker_thread.join()
    if failed:
        raise failed[0]


FILLED_TABLES = (GatewaySession, Review, ReviewGroup, OutboxEvent)


@contextmanager
def indexes_built_afterwards(engine: Engine, models: Sequence[type[SQLModel]]) -> Iterator[None]:
    """Drop the tables' secondary indexes for the fill and build them again at its end.

    Building an index over a full table sorts once; keeping it while rows arrive in random id
    order costs a random write per row per index, which is most of a fill's time. The indexes
    built are exactly the ones the migrations made (the tables' own definitions).
    """
    indexes = [index for model in models for index in table_of(model).indexes]
    with engine.begin() as connection:
        for index in indexes:
            index.drop(connection)
    yield
    with engine.begin() as connection:
        for index in indexes:
            index.create(connection)


class RowMaker:
    """Makes the rows, in the order they are filed, as the text each column stores."""

    def __init__(self, rng: random.Random, organization_id: uuid.UUID, *, sqlite: bool) -> None:
        self.rng = rng
        self.organization = organization_id.hex
        self.zone = "" if sqlite else "+00"  # SQLite keeps UTC times without an offset
        self.user_ids = [self.new_id() for _ in range(USERS)]
        self.start = datetime.now(UTC) - SPAN
        self.made = 0
        self.pending: list[tuple[uuid.UUID, list[str]]] = []
        self.statuses, self.status_weights = zip(*STATUS_MIX.items(), strict=True)
        self.sizes, self.size_weights = zip(*GROUPS_PER_REVIEW.items(), strict=True)

    def new_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def time(self, moment: datetime) -> str:
        return moment.strftime(SQLITE_DATETIME) + self.zone

    def users(self) -> list[Row]:
        now = self.time(datetime.now(UTC))
        rows: list[Row] = []
        for number, user_id in enumerate(self.user_ids):
            groups = self.rng.sample(range(GROUPS), self.rng.choice((1, 1, 2)))
            names = ", ".join(f'"{group_name(g)}"' for g in groups)
            rows.append(
                (
                    user_id,
                    self.organization,
                    f"user-{number:04d}",
                    f"user-{number:04d}@example.com",
                    f"User {number:04d}",
                    f"[{names}]",
                    "active",
                    now,
                )
            )
        return rows

    def reviews(
        self, connection_id: str, total: int, count: int
    ) -> Iterator[tuple[Row, Row, list[Row]]]:
        """The next ``count`` reviews of ``total``, evenly spread over the year."""
        rng, step = self.rng, SPAN / total
        for number in range(self.made, min(total, self.made + count)):
            created = self.start + step * number
            created_at = self.time(created)
            decided_at = self.time(created + timedelta(minutes=rng.randint(1, 120)))
            status = rng.choices(self.statuses, self.status_weights)[0]
            owner_id = rng.choice(self.user_ids)
            size = rng.choices(self.sizes, self.size_weights)[0]
            groups = sorted(group_name(g) for g in rng.sample(range(GROUPS), size))
            session_id, review_id = self.new_id(), self.new_id()
            entries = [
                self.entry(review_id, created_at, group, status, decided_at, first=i == 0)
                for i, group in enumerate(groups)
            ]
            if status is ReviewStatus.PENDING:
                waiting = [str(e[5]) for e in entries if e[6] == ReviewStatus.PENDING.value]
                self.pending.append((uuid.UUID(hex=review_id), waiting))
            ended = status in (ReviewStatus.REJECTED, ReviewStatus.REVOKED)
            session: Row = (
                session_id,
                self.organization,
                owner_id,
                connection_id,
                CONNECTION_NAME,
                "select * from orders where id = 42",
                ONE_TIME,
                DURATION_NS,
                created_at,
                decided_at if status is ReviewStatus.EXECUTED else None,
            )
            review: Row = (
                review_id,
                self.organization,
                session_id,
                owner_id,
                CONNECTION_NAME,
                ONE_TIME,
                status.value,
                "[]",
                0,
                0,
                DURATION_NS,
                "not now" if status is ReviewStatus.REJECTED else None,
                created_at,
                decided_at if status is ReviewStatus.REVOKED else None,
                decided_at if ended else None,
            )
            yield session, review, entries
        self.made = min(total, self.made + count)

    def entry(
        self,
        review_id: str,
        created_at: str,
        group: str,
        status: ReviewStatus,
        decided_at: str,
        *,
        first: bool,
    ) -> Row:
        """A group's entry: PENDING ones may have one group approved already; a rejection is
        one group's, leaving the others PENDING though nothing waits on them any more."""
        if status is ReviewStatus.PENDING:
            approved_already = first and self.rng.random() < 0.3
            entry_status = ReviewStatus.APPROVED if approved_already else ReviewStatus.PENDING
        elif status is ReviewStatus.REJECTED:
            entry_status = ReviewStatus.REJECTED if first else ReviewStatus.PENDING
        else:
            entry_status = ReviewStatus.APPROVED
        decided = entry_status is not ReviewStatus.PENDING
        return (
            self.new_id(),
            review_id,
            self.organization,
            created_at,
            status.value,
            group,
            entry_status.value,
            self.rng.choice(self.user_ids) if decided else None,
            decided_at if decided else None,
            0,
        )

    def backlog(self) -> list[Row]:
        """A burst's backlog: one undelivered review.created per pending review, repeated."""
        now = self.time(datetime.now(UTC))
        rows: list[Row] = []
        for number in range(UNDELIVERED_EVENTS):
            review_id, _ = self.pending[number % len(self.pending)]
            payload = f'{{"status": "PENDING", "review_id": "{review_id}"}}'
            rows.append(("review.created", review_id.hex, payload, now, 0))
        return rows


class BulkWriter:
    """Appends rows to a table the fastest way each backend offers."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"

    def write(self, table: str, columns: Sequence[str], rows: list[Row]) -> None:
        quoted = ", ".join(f'"{name}"' for name in columns)
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            # The rows are consistent by construction: checking each one's foreign keys
            # would double the time of the fill.
            if self.sqlite:
                cursor.execute("PRAGMA foreign_keys=OFF")
                # Rows arrive in random id order: the id indexes must stay in memory.
                cursor.execute(f"PRAGMA cache_size=-{SQLITE_FILL_CACHE_KIB}")
                # The engine runs SQLite in autocommit mode: without BEGIN every row would be
                # a transaction of its own.
                cursor.execute("BEGIN IMMEDIATE")
                marks = ", ".join("?" * len(columns))
                insert = f'INSERT INTO "{table}" ({quoted}) VALUES ({marks})'  # noqa: S608
                cursor.executemany(insert, rows)
                raw.commit()
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute("PRAGMA cache_size=-2000")  # SQLite's default
            else:
                cursor.execute("SET LOCAL session_replication_role = replica")
                with cursor.copy(f'COPY "{table}" ({quoted}) FROM STDIN') as copy:
                    copy.write("".join(map(_copy_line, rows)))
                raw.commit()
        finally:
            raw.close()


def _copy_line(row: Row) -> str:
    """One row in COPY's text format (no value here holds a tab, newline or backslash)."""
    return "\t".join("\\N" if value is None else str(value) for value in row) + "\n"
