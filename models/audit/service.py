"""Recording acts in the transaction that performs them, and reading them back page by page."""

import base64
import binascii
import csv
import io
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert
from sqlalchemy import select as core_select
from sqlmodel import Session

from models.audit.schema import AuditEvent, AuditEventPublic, AuditPage
from models.core import errors
from models.core.db import table_of
from models.users.schema import User

SYSTEM_ACTOR = "accessgate"  # the service itself: an expiry
MAX_CURSOR_LENGTH = 64
EXPORT_BATCH = 1000
_table = table_of(AuditEvent)
_INSERT = insert(_table)  # decisions record one on every call: built once


def actor_label(user: User | None) -> str:
    """How a person is named in the trail: their e-mail, else their sub."""
    if user is None:
        return "anonymous"
    return user.email or user.sub


def record_audit(
    db: Session,
    *,
    kind: str,
    actor: User | None,
    door: str,
    target: str,
    now: datetime,
    details: Mapping[str, Any] | None = None,
    review_id: uuid.UUID | None = None,
    organization_id: uuid.UUID | None = None,
    actor_name: str | None = None,
) -> None:
    """Add one act to the caller's transaction: it is recorded if, and only if, it happened.

    ``actor_name`` names an actor that is not a user (``accessgate`` itself, a sidecar).
    """
    db.execute(
        _INSERT,
        {
            "organization_id": organization_id or (actor.organization_id if actor else None),
            "at": now,
            "kind": kind,
            "actor": actor_name or actor_label(actor),
            "actor_id": None if actor is None else actor.id,
            "door": door,
            "target": target,
            "review_id": review_id,
            "details": dict(details or {}),
        },
    )


@dataclass(frozen=True)
class AuditFilter:
    since: datetime | None = None
    until: datetime | None = None
    actor: str | None = None
    kind: str | None = None
    review_id: uuid.UUID | None = None

    def conditions(self, organization_id: uuid.UUID) -> list[ColumnElement[bool]]:
        found = [_table.c.organization_id == organization_id]
        if self.since is not None:
            found.append(_table.c.at >= self.since)
        if self.until is not None:
            found.append(_table.c.at < self.until)
        if self.actor is not None:
            found.append(_table.c.actor == self.actor)
        if self.kind is not None:
            found.append(_table.c.kind == self.kind)
        if self.review_id is not None:
            found.append(_table.c.review_id == self.review_id)
        return found


BAD_CURSOR = "cursor: not one this server gave out; start again without it"


def _encode(event_id: int) -> str:
    return base64.urlsafe_b64encode(f"audit|{event_id}".encode()).rstrip(b"=").decode()


def _decode(cursor: str) -> int:
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise errors.InvalidRequest(BAD_CURSOR)
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = text.partition("|")
        if prefix != "audit":
            raise ValueError(prefix)
        return int(number)
    except (binascii.Error, ValueError) as exc:
        raise errors.InvalidRequest(BAD_CURSOR) from exc


def list_audit(
    *, db: Session, viewer: User, where: AuditFilter, limit: int, cursor: str | None
) -> AuditPage:
    """A page of the organization's trail, newest first (admins)."""
    if not viewer.is_admin:  # users.service records audit events: its check cannot be imported
        raise errors.AdminRequired("only administrators can do this")
    statement = core_select(_table).where(*where.conditions(viewer.organization_id))
    if cursor is not None:
        statement = statement.where(_table.c.id < _decode(cursor))
    rows = db.execute(statement.order_by(_table.c.id.desc()).limit(limit + 1)).mappings().all()
    items = [_public(dict(row)) for row in rows[:limit]]
    more = len(rows) > limit
    return AuditPage(items=items, next_cursor=_encode(items[-1].id) if more and items else None)


def _public(row: Mapping[str, Any]) -> AuditEventPublic:
    return AuditEventPublic(
        id=row["id"],
        at=row["at"],
        kind=row["kind"],
        actor=row["actor"],
        door=row["door"],
        target=row["target"],
        details=row["details"],
    )


def export_batches(
    db: Session, organization_id: uuid.UUID, where: AuditFilter, after: int
) -> list[AuditEventPublic]:
    """The next batch of the trail after event ``after``, oldest first."""
    statement = (
        core_select(_table)
        .where(*where.conditions(organization_id), _table.c.id > after)
        .order_by(_table.c.id)
        .limit(EXPORT_BATCH)
    )
    return [_public(dict(row)) for row in db.execute(statement).mappings()]


CSV_COLUMNS = ("id", "at", "kind", "actor", "door", "target", "details")


def as_jsonl(event: AuditEventPublic) -> str:
    return event.model_dump_json() + "\n"


def as_csv_line(event: AuditEventPublic | None) -> str:
    """One CSV line (the header for None); details as JSON in one cell."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if event is None:
        writer.writerow(CSV_COLUMNS)
    else:
        writer.writerow(
            [
                event.id,
                event.at.isoformat(),
                event.kind,
                event.actor,
                event.door,
                event.target,
                json.dumps(event.details, separators=(",", ":"), sort_keys=True),
            ]
        )
    return out.getvalue()


def walk(
    open_db: Any, organization_id: uuid.UUID, where: AuditFilter
) -> Iterator[list[AuditEventPublic]]:
    """Every matching event, oldest first, a batch at a time, each batch read in a session of
    its own (``open_db()``): an export of any size holds one batch in memory."""
    after = 0
    while True:
        with open_db() as db:
            batch = export_batches(db, organization_id, where, after)
        if not batch:
            return
        yield batch
        after = batch[-1].id
