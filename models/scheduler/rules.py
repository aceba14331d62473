"""The scheduler's rules, each a due time in the database claimed by one replica at a time.

Every rule reads only the rows that are due (an index per rule), claims a batch of them in a
transaction (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so replicas running the same rule take
different rows and never wait for each other; SQLite has one writer at a time), changes them so
they are no longer due, and writes the outbox event that tells people, in that same
transaction. A rule that fired is never fired again, and a due time that passed while no
replica ran is found at the next run: nothing is kept in memory.

- **expiry**: a PENDING review past ``expires_at`` is rejected by the system;
- **reminders**: a PENDING review past ``next_reminder_at`` gets a ``review.reminder`` event
  (a reply under each of its cards) and its next due time, up to the configured count;
  reviewers who take reminders by direct message get a digest instead (``digest_due_at``);
- **digests**: one direct message per reviewer and interval listing what waits on them;
- **access ends**: an APPROVED JIT review past ``revoke_at`` gets a ``review.access_ended``
  event once (its cards lose the Revoke button, the requester is told).
"""

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, update
from sqlalchemy import select as core_select
from sqlmodel import Session

from models.core.db import finds_any, table_of, write_transaction
from models.delivery.outbox import EventKind, record_event, record_review_event
from models.reviews.machine import ReviewStatus
from models.reviews.schema import Review, ReviewGroup, ReviewType
from models.reviews.service import expire_review, is_past_deadline
from models.reviews.timing import ReviewTiming
from models.users.schema import User, UserStatus

BATCH = 50  # rows claimed per transaction: short writes, however much fell due at once

_review = table_of(Review)
_entry = table_of(ReviewGroup)
_user = table_of(User)


@dataclass(frozen=True)
class Fired:
    """How many of each rule one run fired."""

    expired: int = 0
    reminded: int = 0
    digests: int = 0
    access_ended: int = 0

    @property
    def total(self) -> int:
        return self.expired + self.reminded + self.digests + self.access_ended


def run_due_rules(db: Session, *, now: datetime, timing: ReviewTiming) -> Fired:
    """Fire every rule that is due at ``now``, a batch at a time until none is."""
    counts = {"expired": 0, "reminded": 0, "digests": 0, "access_ended": 0}
    for name, rule in (
        ("expired", expire_due),
        ("reminded", remind_due),
        ("digests", send_due_digests),
        ("access_ended", end_due_access),
    ):
        while True:
            fired = rule(db, now=now, timing=timing)
            counts[name] += fired
            if fired < BATCH:
                break
    return Fired(**counts)


@contextmanager
def _claimed(db: Session, statement: Select[Any]) -> Iterator[Sequence[Any]]:
    """The due rows, locked for the block's transaction, which commits at its end; rows another
    replica is claiming are skipped. Nothing due (the common case) takes no write lock."""
    if not finds_any(db, statement):
        yield []
        return
    with write_transaction(db):
        if db.get_bind().dialect.name == "postgresql":
            statement = statement.with_for_update(skip_locked=True)
        yield db.execute(statement.limit(BATCH)).mappings().all()


def expire_due(db: Session, *, now: datetime, timing: ReviewTiming) -> int:
    """Reject every PENDING review whose deadline has passed."""
    del timing  # the deadline was set when the review was filed
    with _claimed(
        db,
        core_select(_review)
        .where(_review.c.status == ReviewStatus.PENDING, _review.c.expires_at <= now)
        .order_by(_review.c.expires_at),
    ) as due:
        for row in due:
            review = dict(row)
            if is_past_deadline(review, now):
                expire_review(db, review, now=now)
    return len(due)


def remind_due(db: Session, *, now: datetime, timing: ReviewTiming) -> int:
    """Remind the reviewers of every PENDING review whose reminder is due."""
    with _claimed(
        db,
        core_select(
            _review.c.id,
            _review.c.session_id,
            _review.c.organization_id,
            _review.c.owner_id,
            _review.c.reminders_sent,
        )
        .where(_review.c.status == ReviewStatus.PENDING, _review.c.next_reminder_at <= now)
        .order_by(_review.c.next_reminder_at),
    ) as due:
        for review in due:
            sent = review["reminders_sent"] + 1
            db.execute(
                update(_review)
                .where(_review.c.id == review["id"])
                .values(reminders_sent=sent, next_reminder_at=timing.reminder_after(now, sent))
            )
            undecided = _undecided_groups(db, review["id"])
            record_review_event(
                db,
                kind=EventKind.REVIEW_REMINDER,
                review_id=review["id"],
                session_id=review["session_id"],
                status=ReviewStatus.PENDING.value,
                now=now,
                details={"reminder": sent, "groups": undecided},
            )
            _book_digests(db, review, undecided, now=now, timing=timing)
    return len(due)


def _undecided_groups(db: Session, review_id: uuid.UUID) -> list[str]:
    return list(
        db.execute(
            core_select(_entry.c.group)
            .where(_entry.c.review_id == review_id, _entry.c.status == ReviewStatus.PENDING)
            .order_by(_entry.c.group)
        ).scalars()
    )


def _book_digests(
    db: Session, review: Any, groups: list[str], *, now: datetime, timing: ReviewTiming
) -> None:
    """Reviewers of ``groups`` who take reminders by DM get a digest, at most one an interval.

    A digest already booked stays where it is; otherwise the next one is due now, or an
    interval after the last one sent, whichever is later.
    """
    takers = db.execute(
        core_select(_user.c.id, _user.c.groups, _user.c.digest_sent_at).where(
            _user.c.organization_id == review["organization_id"],
            _user.c.reminders_by_dm.is_(True),
            _user.c.chat_id.is_not(None),
            _user.c.status == UserStatus.ACTIVE,
            _user.c.id != review["owner_id"],
            _user.c.digest_due_at.is_(None),
        )
    ).all()
    wanted = set(groups)
    for taker in takers:
        if wanted.intersection(taker.groups):
            db.execute(
                update(_user)
                .where(_user.c.id == taker.id, _user.c.digest_due_at.is_(None))
                .values(digest_due_at=_next_digest(taker.digest_sent_at, now, timing))
            )


def _next_digest(sent_at: datetime | None, now: datetime, timing: ReviewTiming) -> datetime:
    if sent_at is None:
        return now
    return max(now, sent_at + timing.remind_after)


def send_due_digests(db: Session, *, now: datetime, timing: ReviewTiming) -> int:
    """Queue the digest DM of every reviewer whose digest is due."""
    del timing
    with _claimed(
        db,
        core_select(_user.c.id).where(_user.c.digest_due_at <= now).order_by(_user.c.digest_due_at),
    ) as due:
        for user in due:
            db.execute(
                update(_user)
                .where(_user.c.id == user["id"])
                .values(digest_due_at=None, digest_sent_at=now)
            )
            record_event(
                db,
                kind=EventKind.REMINDER_DIGEST,
                # Digests of one reviewer are delivered in order: they share this key.
                review_id=user["id"],
                payload={"user_id": str(user["id"])},
                now=now,
            )
    return len(due)


def end_due_access(db: Session, *, now: datetime, timing: ReviewTiming) -> int:
    """Tell every APPROVED JIT review whose access ended that it did, once."""
    del timing
    with _claimed(
        db,
        core_select(_review.c.id, _review.c.session_id)
        .where(
            and_(
                _review.c.status == ReviewStatus.APPROVED,
                _review.c.access_end_told.is_(False),
                _review.c.revoke_at <= now,
                _review.c.type == ReviewType.JIT,
            )
        )
        .order_by(_review.c.revoke_at),
    ) as due:
        for review in due:
            db.execute(
                update(_review).where(_review.c.id == review["id"]).values(access_end_told=True)
            )
            record_review_event(
                db,
                kind=EventKind.REVIEW_ACCESS_ENDED,
                review_id=review["id"],
                session_id=review["session_id"],
                status=ReviewStatus.APPROVED.value,
                now=now,
            )
    return len(due)
