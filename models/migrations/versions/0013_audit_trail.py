"""the audit trail: an append-only table of security-relevant acts

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 21:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import models.core.db

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "audit events are append-only"


def upgrade() -> None:
    op.create_table(
        "audit_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=True),
        sa.Column("at", models.core.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=320), nullable=False),
        sa.Column("actor_id", sa.Uuid(), nullable=True),
        sa.Column("door", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("review_id", sa.Uuid(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_event_listing", "audit_event", ["organization_id", "id"])
    op.create_index("ix_audit_event_by_kind", "audit_event", ["organization_id", "kind", "id"])
    op.create_index("ix_audit_event_by_actor", "audit_event", ["organization_id", "actor", "id"])
    op.create_index("ix_audit_event_by_review", "audit_event", ["review_id", "id"])
    op.create_index("ix_audit_event_by_time", "audit_event", ["organization_id", "at"])
    # The trail is never rewritten, whoever holds the database's credentials for the service.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{APPEND_ONLY}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event "
            "FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()"
        )
    else:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_event_no_{action.lower()} BEFORE {action} ON audit_event "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_event_append_only ON audit_event")
        op.execute("DROP FUNCTION audit_event_append_only()")
    op.drop_table("audit_event")
