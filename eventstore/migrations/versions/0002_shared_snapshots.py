"""Snapshots of ``user:``/``app:`` state, so shared state reads fold only the newest events.

Revision ID: 0002
Revises: 0001
Create Date: 2025-06-01

A cache table only (droppable, rebuilt from the log). Must match ``eventstore/_schema.py``;
``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evs_shared_snapshots",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "position"),
    )


def downgrade() -> None:
    op.drop_table("evs_shared_snapshots")
