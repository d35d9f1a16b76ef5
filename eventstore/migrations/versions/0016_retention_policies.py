"""Retention policies per app (``EventStore.set_retention``, ``evs retention``).

Revision ID: 0016
Revises: 0013
Create Date: 2026-12-02

One table, ``evs_retention_policies``: a row per app holding how old (seconds since the last
update) its sessions may get before ``evs prune`` deletes them, and where they are archived.
Configuration, not a cache: downgrading drops the policies (the sessions and their events are
untouched). Nothing else changes, so existing rows need no backfill. Must match
``eventstore/_schema.py``; ``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evs_retention_policies",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("older_than", sa.Float(), nullable=False),
        sa.Column("archive", sa.Text(), nullable=True),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("app_name"),
    )


def downgrade() -> None:
    op.drop_table("evs_retention_policies")
