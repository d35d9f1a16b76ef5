"""The initial event store schema: sessions, events, snapshots, artifacts.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Must match ``eventstore/_schema.py`` exactly; ``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# INTEGER PRIMARY KEY makes the column SQLite's rowid; PostgreSQL gets a BIGINT identity.
_POSITION = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "evs_sessions",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index(
        "ix_evs_sessions_app_user", "evs_sessions", ["app_name", "user_id", "session_id"]
    )

    op.create_table(
        "evs_events",
        sa.Column("position", _POSITION, sa.Identity(), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("invocation_id", sa.String(255), nullable=False),
        sa.Column("author", sa.String(255), nullable=False),
        sa.Column("timestamp", sa.Float(), nullable=False),
        sa.Column("shared_state", sa.Boolean(), nullable=False),
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("position"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["evs_sessions.session_id"],
            name="fk_evs_events_session",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("session_id", "seq", name="uq_evs_events_session_seq"),
        sa.UniqueConstraint("session_id", "event_id", name="uq_evs_events_session_event"),
    )
    # Partial: only the few events touching user:/app: state pay for this index.
    op.create_index(
        "ix_evs_events_shared",
        "evs_events",
        ["app_name", "position"],
        sqlite_where=sa.text("shared_state"),
        postgresql_where=sa.text("shared_state"),
    )

    op.create_table(
        "evs_snapshots",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["evs_sessions.session_id"],
            name="fk_evs_snapshots_session",
            ondelete="CASCADE",
        ),
    )

    op.create_table(
        "evs_artifacts",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("session_scope", sa.String(255), nullable=False),
        sa.Column("filename", sa.String(512), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "session_scope", "filename", "version"),
    )


def downgrade() -> None:
    op.drop_table("evs_artifacts")
    op.drop_table("evs_snapshots")
    op.drop_index("ix_evs_events_shared", table_name="evs_events")
    op.drop_table("evs_events")
    op.drop_index("ix_evs_sessions_app_user", table_name="evs_sessions")
    op.drop_table("evs_sessions")
