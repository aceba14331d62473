"""webhooks: events written with the acts they tell of, endpoints, and deliveries

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23 21:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _moment(name: str, *, nullable: bool = True) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, models.core.db.UTCDateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "webhook_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("review_id", sa.Uuid(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        _moment("created_at", nullable=False),
        sa.Column("fanned_out", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    not_fanned_out = sa.text("fanned_out = false")
    op.create_index(
        "ix_webhook_event_not_fanned_out",
        "webhook_event",
        ["id"],
        sqlite_where=not_fanned_out,
        postgresql_where=not_fanned_out,
    )
    op.create_index("ix_webhook_event_created_at", "webhook_event", ["created_at"])
    op.create_table(
        "webhook_endpoint",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=False),
        _moment("created_at", nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_webhook_endpoint_organization_id", "webhook_endpoint", ["organization_id"])
    op.create_table(
        "webhook_delivery",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("review_id", sa.Uuid(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        _moment("event_at", nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _moment("next_attempt_at", nullable=False),
        _moment("leased_until"),
        sa.Column("lease_token", sa.String(length=32), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=1000), nullable=True),
        _moment("delivered_at"),
        sa.ForeignKeyConstraint(["endpoint_id"], ["webhook_endpoint.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    pending = sa.text("status = 'pending'")
    op.create_index(
        "ix_webhook_delivery_due",
        "webhook_delivery",
        ["next_attempt_at"],
        sqlite_where=pending,
        postgresql_where=pending,
    )
    op.create_index(
        "ix_webhook_delivery_order", "webhook_delivery", ["endpoint_id", "review_id", "id"]
    )
    op.create_index(
        "ix_webhook_delivery_listing", "webhook_delivery", ["endpoint_id", "status", "id"]
    )


def downgrade() -> None:
    op.drop_table("webhook_delivery")
    op.drop_table("webhook_endpoint")
    op.drop_table("webhook_event")
