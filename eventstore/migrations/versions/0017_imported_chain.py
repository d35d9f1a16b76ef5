"""The chain an imported log carried, kept as evidence (``evs import --force``).

Revision ID: 0017
Revises: 0013
Create Date: 2026-12-02

One table, ``evs_imported_chain``: a row per (session, seq) of an event imported with
``--force``, holding the exporting store's chain hash and signature of that event and the
session id it was exported from. The importing store chains (and, keyed, signs) the events
itself, so the session is usable; this table keeps what the export said about them, so
``evs verify`` can still name where the exported chain broke. It is written with the session
in one transaction, goes with the session (``ON DELETE CASCADE``) and is never changed. Nothing
else changes, so existing rows need no backfill. Must match ``eventstore/_schema.py``;
``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evs_imported_chain",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("chain_hash", sa.LargeBinary(), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=True),
        sa.Column("origin_session_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["evs_sessions.session_id"], ondelete="CASCADE",
            name="fk_evs_imported_chain_session",
        ),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("evs_imported_chain")
