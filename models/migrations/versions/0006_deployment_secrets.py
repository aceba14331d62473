"""deployment secrets

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 11:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deployment_secret",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("sealed_value", sa.Text(), nullable=False),
        sa.Column("created_at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("deployment_secret")
