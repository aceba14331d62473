"""chat pending lists

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:55:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chat_pending_list",
        sa.Column("chat_id", sa.String(length=64), nullable=False),
        sa.Column("response_url", sa.String(length=2000), nullable=False),
        sa.Column("shown_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("chat_id"),
    )


def downgrade() -> None:
    op.drop_table("chat_pending_list")
