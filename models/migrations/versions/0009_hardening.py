"""hardening: who set a review's time window, shared throttle counters, no stored sign-in attempts

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 15:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("review") as table:
        table.add_column(sa.Column("time_window_set_by_id", sa.Uuid(), nullable=True))
        table.create_foreign_key(
            "fk_review_time_window_set_by_id_user", "user", ["time_window_set_by_id"], ["id"]
        )
    op.create_table(
        "throttle_counter",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_throttle_counter_expires_at", "throttle_counter", ["expires_at"])
    # Sign-in attempts now travel sealed in the state parameter; one in flight during the
    # upgrade is asked to start again.
    op.drop_index("ix_sign_in_attempt_created_at", table_name="sign_in_attempt")
    op.drop_table("sign_in_attempt")


def downgrade() -> None:
    op.create_table(
        "sign_in_attempt",
        sa.Column("state_hash", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("code_verifier", sa.String(length=128), nullable=False),
        sa.Column("return_to", sa.String(length=2048), nullable=True),
        sa.Column("created_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state_hash"),
    )
    op.create_index("ix_sign_in_attempt_created_at", "sign_in_attempt", ["created_at"])
    op.drop_index("ix_throttle_counter_expires_at", table_name="throttle_counter")
    op.drop_table("throttle_counter")
    with op.batch_alter_table("review") as table:
        table.drop_constraint("fk_review_time_window_set_by_id_user", type_="foreignkey")
        table.drop_column("time_window_set_by_id")
