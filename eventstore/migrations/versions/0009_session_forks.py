"""Fork links: which session was forked from which, at which seq (``EventStore.fork``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

One table, ``evs_session_forks``: a row per fork naming its origin and the origin's seq. It
goes with the fork (``ON DELETE CASCADE``) and outlives the origin (no foreign key names it: the
fork holds copies of the origin's events, not references). Nothing else changes, so existing
rows need no backfill. Must match ``eventstore/_schema.py``;
``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evs_session_forks",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("origin_session_id", sa.String(255), nullable=False),
        sa.Column("origin_seq", sa.Integer(), nullable=False),
        sa.Column("forked_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["evs_sessions.session_id"], ondelete="CASCADE",
            name="fk_evs_session_forks_session",
        ),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index(
        "ix_evs_session_forks_origin", "evs_session_forks", ["origin_session_id", "forked_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_evs_session_forks_origin", table_name="evs_session_forks")
    op.drop_table("evs_session_forks")
