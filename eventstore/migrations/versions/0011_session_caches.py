"""Named caches of state derived from a session's log (``EventStore.save_cache``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30

One table, ``evs_session_caches``: a row per (session, cache name) holding the cache's seq and
bytes. A cache like the snapshots: it goes with the session (``ON DELETE CASCADE``), is dropped
by ``evs db rebuild-snapshots``, is not copied by a fork, and its reader checks it against the
log before using it. Nothing else changes, so existing rows need no backfill. Must match
``eventstore/_schema.py``; ``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evs_session_caches",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["evs_sessions.session_id"], ondelete="CASCADE",
            name="fk_evs_session_caches_session",
        ),
        sa.PrimaryKeyConstraint("session_id", "name"),
    )


def downgrade() -> None:
    op.drop_table("evs_session_caches")
