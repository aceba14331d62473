"""Lists of reviews that cost the same at any depth and whatever the size of the table.

Every list walks an index in its own order and stops after one page: newest first by
``(created_at, id)`` from a cursor (keyset pagination), never an offset or a count. A reviewer's
reviews are merged from one short walk per reviewer group (over the copy of the key kept on
``review_group``) and one over their own reviews, so a page reads about ``limit`` rows per group
however many reviews the organization has.
"""

import base64
import binascii
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement, Select, tuple_, union
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from models.core import errors
from models.core.db import table_of
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review, ReviewGroup, ReviewPublic
from models.reviews.service import VIEW_COLUMNS, review_views_of
from models.users.schema import User

_entries = table_of(ReviewGroup)
# Only the columns a review shows: every id read is parsed, and a page reads hundreds.
_shown = [table_of(Review).c[name] for name in VIEW_COLUMNS]

SelectT = TypeVar("SelectT", bound=Select[Any])

MAX_CURSOR_LENGTH = 200
BAD_CURSOR = (
    "cursor: not one this server gave out; pass the next_cursor of the previous page, "
    "or leave cursor out to start from the newest review"
)


@dataclass(frozen=True)
class Position:
    """Where a walk stopped: the last review it returned."""

    created_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        text = f"{self.created_at.isoformat()}|{self.id.hex}"
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()

    @classmethod
    def decode(cls, cursor: str) -> "Position":
        """The position ``cursor`` names; InvalidRequest for anything else."""
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise errors.InvalidRequest(BAD_CURSOR)
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            created_at, _, review_id = text.partition("|")
            position = cls(datetime.fromisoformat(created_at), uuid.UUID(hex=review_id))
        except (binascii.Error, ValueError) as exc:
            raise errors.InvalidRequest(BAD_CURSOR) from exc
        if position.created_at.tzinfo is None:
            raise errors.InvalidRequest(BAD_CURSOR)
        return position


class ReviewPage(BaseModel):
    items: list[ReviewPublic]
    next_cursor: str | None = Field(
        description="Pass it as `cursor` for the next page; null on the last page."
    )


def list_reviews(
    *,
    db: Session,
    viewer: User,
    status: ReviewStatus | None,
    limit: int,
    cursor: str | None,
) -> ReviewPage:
    """The reviews ``viewer`` may see, newest first, from ``cursor`` on.

    Admins see every review of the organization; anyone else their own and those of their
    reviewer groups. Walking the cursors visits each of them once, while new ones are filed.
    """
    after = None if cursor is None else Position.decode(cursor)
    # One row more than the page tells whether another page follows.
    wanted = limit + 1
    if viewer.is_admin:
        statement = _newest_first(
            core_select(*_shown).where(
                col(Review.organization_id) == viewer.organization_id,
                *_status_is(status),
                *_before(col(Review.created_at), col(Review.id), after),
            ),
            col(Review.created_at),
            col(Review.id),
        ).limit(wanted)
    else:
        keys = _reviewer_keys(viewer, status, after, wanted).subquery()
        statement = _newest_first(
            core_select(*_shown).join(keys, col(Review.id) == keys.c.id),
            col(Review.created_at),
            col(Review.id),
        ).limit(wanted)
    reviews = [dict(row) for row in db.execute(statement).mappings()]
    page = reviews[:limit]
    last = Position(page[-1]["created_at"], page[-1]["id"]) if len(reviews) > limit else None
    return ReviewPage(
        items=review_views_of(db, page), next_cursor=None if last is None else last.encode()
    )


def _reviewer_keys(
    viewer: User, status: ReviewStatus | None, after: Position | None, wanted: int
) -> Any:
    """The keys of the first ``wanted`` reviews of each reviewer group and of the viewer's own.

    Each walk reads its own index newest first and stops after ``wanted`` rows; the union then
    holds the page, whichever walks its reviews come from.
    """
    own: Select[Any] = _newest_first(
        # By owner alone (a user belongs to one organization): with the organization too, a
        # planner may walk the organization's index and look at every review for the owner's.
        select(col(Review.id).label("id")).where(
            col(Review.owner_id) == viewer.id,
            *_status_is(status),
            *_before(col(Review.created_at), col(Review.id), after),
        ),
        col(Review.created_at),
        col(Review.id),
    ).limit(wanted)
    walks: list[Select[Any]] = [own]
    for group in sorted(set(viewer.groups)):
        of_group: Select[Any] = select(col(ReviewGroup.review_id).label("id")).where(
            col(ReviewGroup.organization_id) == viewer.organization_id,
            col(ReviewGroup.group) == group,
            *([] if status is None else [col(ReviewGroup.review_status) == status]),
            *_before(col(ReviewGroup.review_created_at), col(ReviewGroup.review_id), after),
        )
        walks.append(
            _newest_first(
                of_group, col(ReviewGroup.review_created_at), col(ReviewGroup.review_id)
            ).limit(wanted)
        )
    return _union(walks)


def _union(walks: list[Select[Any]]) -> Any:
    # SQLite takes ORDER BY and LIMIT in a compound select only from a subquery.
    return union(*(select(walk.subquery()) for walk in walks))


def _newest_first(statement: SelectT, created_at: Any, review_id: Any) -> SelectT:
    return statement.order_by(created_at.desc(), review_id.desc())


def _status_is(status: ReviewStatus | None) -> list[ColumnElement[bool]]:
    return [] if status is None else [col(Review.status) == status]


def _before(created_at: Any, review_id: Any, after: Position | None) -> list[ColumnElement[bool]]:
    """Rows after ``after`` in newest-first order; one row-value comparison the index serves."""
    if after is None:
        return []
    return [tuple_(created_at, review_id) < tuple_(after.created_at, after.id)]


def reviews_waiting_on(*, db: Session, reviewer: User, limit: int) -> list[uuid.UUID]:
    """Pending reviews, oldest first, where one of ``reviewer``'s groups has not decided yet.

    Only the pending reviews of the reviewer's groups are read, oldest first, group by group.
    The reviewer's own sessions are left out: they cannot approve those.
    """
    if not reviewer.groups:
        return []
    # Every review of their own, whatever its status (the walks keep only pending ones): by
    # owner alone this reads the owner's index, never the organization's pending reviews.
    own = select(col(Review.id)).where(col(Review.owner_id) == reviewer.id)
    walks: list[Select[Any]] = []
    for group in sorted(set(reviewer.groups)):
        walk: Select[Any] = (
            core_select(
                _entries.c.review_id.label("id"), _entries.c.review_created_at.label("created_at")
            )
            .where(
                _entries.c.organization_id == reviewer.organization_id,
                _entries.c.group == group,
                _entries.c.review_status == ReviewStatus.PENDING,
                _entries.c.status == ReviewStatus.PENDING,
                _entries.c.review_id.not_in(own),
            )
            .order_by(_entries.c.review_created_at, _entries.c.review_id)
            .limit(limit)
        )
        walks.append(walk)
    waiting = _union(walks).subquery()
    statement = select(waiting.c.id).order_by(waiting.c.created_at, waiting.c.id).limit(limit)
    return list(db.exec(statement))
