"""cluster-wide delivery: lease fencing, Slack's pace, uncertain posts, channel health, pruning

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 13:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNDELIVERED = sa.text("delivered_at IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("outbox_event") as table:
        table.add_column(sa.Column("lease_token", sa.String(length=32), nullable=True))
        table.add_column(sa.Column("retried_as", sa.Integer(), nullable=True))
    op.create_index(
        "ix_outbox_event_undelivered",
        "outbox_event",
        ["id"],
        sqlite_where=UNDELIVERED,
        postgresql_where=UNDELIVERED,
    )
    op.create_index(
        "ix_outbox_event_undelivered_review",
        "outbox_event",
        ["review_id", "id"],
        sqlite_where=UNDELIVERED,
        postgresql_where=UNDELIVERED,
    )
    with op.batch_alter_table("chat_delivery_claim") as table:
        table.add_column(
            sa.Column("uncertain", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "chat_pace",
        sa.Column("pace_key", sa.String(length=200), nullable=False),
        sa.Column("next_turn", sa.Float(), nullable=False),
        sa.Column("call_started", sa.Float(), nullable=False, server_default="0"),
        sa.Column("call_answered", sa.Float(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("pace_key"),
    )
    op.create_table(
        "chat_channel_health",
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("last_posted_at", models.core.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=200), nullable=True),
        sa.Column("last_error_at", models.core.db.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("channel"),
    )


def downgrade() -> None:
    op.drop_table("chat_channel_health")
    op.drop_table("chat_pace")
    with op.batch_alter_table("chat_delivery_claim") as table:
        table.drop_column("uncertain")
    op.drop_index("ix_outbox_event_undelivered_review", table_name="outbox_event")
    op.drop_index("ix_outbox_event_undelivered", table_name="outbox_event")
    with op.batch_alter_table("outbox_event") as table:
        table.drop_column("retried_as")
        table.drop_column("lease_token")
