"""reviews in time: reasons, expiry, reminders, told ends of JIT access, browser sessions

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 20:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _moment(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, models.core.db.UTCDateTime(timezone=True), nullable=True)


def upgrade() -> None:
    # Reviews filed before this version have no deadline and no reminders: their reviewers
    # were never told of one.
    # Plain ALTERs, not batches: on SQLite a batch copies the table, and dropping the old copy
    # would cascade to the rows that point at it (review entries, users' reviews).
    op.add_column("review", sa.Column("reason", sa.Text(), nullable=True))
    op.add_column("review", _moment("expires_at"))
    op.add_column("review", _moment("next_reminder_at"))
    op.add_column(
        "review", sa.Column("reminders_sent", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "review",
        sa.Column("access_end_told", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_review_due_expiry", "review", ["status", "expires_at"])
    op.create_index("ix_review_due_reminder", "review", ["status", "next_reminder_at"])
    op.create_index(
        "ix_review_due_access_end", "review", ["status", "access_end_told", "revoke_at"]
    )
    # Access that ended before this version is not announced now, long after the fact.
    op.execute("UPDATE review SET access_end_told = true WHERE revoke_at IS NOT NULL")
    with op.batch_alter_table("review_decision") as table:
        table.alter_column("actor_id", existing_type=sa.Uuid(), nullable=True)
    op.add_column(
        "access_request_rule",
        sa.Column("require_reason", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "user",
        sa.Column("reminders_by_dm", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("user", _moment("digest_due_at"))
    op.add_column("user", _moment("digest_sent_at"))
    op.create_index("ix_user_digest_due_at", "user", ["digest_due_at"])
    op.create_table(
        "browser_session",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_index("ix_browser_session_user_id", "browser_session", ["user_id"])
    op.create_index("ix_browser_session_expires_at", "browser_session", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_browser_session_expires_at", table_name="browser_session")
    op.drop_index("ix_browser_session_user_id", table_name="browser_session")
    op.drop_table("browser_session")
    op.drop_index("ix_user_digest_due_at", table_name="user")
    with op.batch_alter_table("user") as table:
        table.drop_column("digest_sent_at")
        table.drop_column("digest_due_at")
        table.drop_column("reminders_by_dm")
    with op.batch_alter_table("access_request_rule") as table:
        table.drop_column("require_reason")
    for index in ("ix_review_due_access_end", "ix_review_due_reminder", "ix_review_due_expiry"):
        op.drop_index(index, table_name="review")
    with op.batch_alter_table("review") as table:
        table.drop_column("access_end_told")
        table.drop_column("reminders_sent")
        table.drop_column("next_reminder_at")
        table.drop_column("expires_at")
        table.drop_column("reason")
