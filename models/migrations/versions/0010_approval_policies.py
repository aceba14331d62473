"""approval policies of access request rules: distinct approvers, no self force-approval

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POLICIES = ("distinct_approvers", "no_self_force_approval")


def upgrade() -> None:
    for table_name in ("access_request_rule", "review"):
        with op.batch_alter_table(table_name) as table:
            for policy in POLICIES:
                table.add_column(
                    sa.Column(policy, sa.Boolean(), nullable=False, server_default=sa.false())
                )


def downgrade() -> None:
    for table_name in ("access_request_rule", "review"):
        with op.batch_alter_table(table_name) as table:
            for policy in POLICIES:
                table.drop_column(policy)
