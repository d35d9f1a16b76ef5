"""Custom metadata on artifact versions (what ADK's ``save_artifact(custom_metadata=…)`` keeps).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

One nullable column: versions saved before it have no metadata. Must match
``eventstore/_schema.py``; ``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("evs_artifacts", sa.Column("custom_metadata", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evs_artifacts") as batch:
        batch.drop_column("custom_metadata")
