"""review lists that do not grow with the table: keyset indexes, reviewer groups walked alone

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 18:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("review_group") as table:
        table.add_column(sa.Column("organization_id", sa.Uuid(), nullable=True))
        table.add_column(
            sa.Column("review_created_at", models.core.db.UTCDateTime(timezone=True), nullable=True)
        )
        table.add_column(sa.Column("review_status", sa.String(length=32), nullable=True))
    # Copied from the review; the service copies the status again on every change.
    op.execute(
        "UPDATE review_group SET "
        "organization_id = (SELECT organization_id FROM review WHERE review.id = review_id), "
        "review_created_at = (SELECT created_at FROM review WHERE review.id = review_id), "
        "review_status = (SELECT status FROM review WHERE review.id = review_id)"
    )
    with op.batch_alter_table("review_group") as table:
        table.alter_column("organization_id", existing_type=sa.Uuid(), nullable=False)
        table.alter_column(
            "review_created_at",
            existing_type=models.core.db.UTCDateTime(timezone=True),
            nullable=False,
        )
        table.alter_column("review_status", existing_type=sa.String(length=32), nullable=False)
        table.create_foreign_key(
            "fk_review_group_organization_id_organization",
            "organization",
            ["organization_id"],
            ["id"],
        )
        table.create_index(
            "ix_review_group_listing",
            ["organization_id", "group", "review_created_at", "review_id"],
        )
        table.create_index(
            "ix_review_group_listing_by_status",
            ["organization_id", "group", "review_status", "review_created_at", "review_id"],
        )
    with op.batch_alter_table("review") as table:
        table.drop_index("ix_review_organization_id")
        table.drop_index("ix_review_owner_id")
        table.create_index("ix_review_listing", ["organization_id", "created_at", "id"])
        table.create_index(
            "ix_review_listing_by_status", ["organization_id", "status", "created_at", "id"]
        )
        table.create_index("ix_review_listing_by_owner", ["owner_id", "created_at", "id"])


def downgrade() -> None:
    with op.batch_alter_table("review") as table:
        table.drop_index("ix_review_listing_by_owner")
        table.drop_index("ix_review_listing_by_status")
        table.drop_index("ix_review_listing")
        table.create_index("ix_review_owner_id", ["owner_id"])
        table.create_index("ix_review_organization_id", ["organization_id"])
    with op.batch_alter_table("review_group") as table:
        table.drop_index("ix_review_group_listing_by_status")
        table.drop_index("ix_review_group_listing")
        table.drop_constraint("fk_review_group_organization_id_organization", type_="foreignkey")
        table.drop_column("review_status")
        table.drop_column("review_created_at")
        table.drop_column("organization_id")
