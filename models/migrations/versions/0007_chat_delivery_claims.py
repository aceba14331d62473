"""chat delivery claims

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 11:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chat_delivery_claim",
        sa.Column("delivery_key", sa.String(length=200), nullable=False),
        sa.Column("claimed_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("delivery_key"),
    )


def downgrade() -> None:
    op.drop_table("chat_delivery_claim")
