"""Memory over past sessions: a full-text index of the sessions an app asked to remember.

Revision ID: 0006
Revises: 0003
Create Date: 2026-11-30

``evs_memory_sessions`` records which sessions were added to memory and up to which ``seq`` (what
the app asked for). ``evs_memory_rows`` holds the text of those events, one row per event with
text; it is derived from the log (``evs memory rebuild`` re-derives it). Full-text search is the
database's own: an FTS5 table over the rows on SQLite (external content, kept in step by
triggers), a stored ``tsvector`` column with a GIN index on PostgreSQL; both use a
language-neutral tokenizer (``unicode61`` / the ``simple`` configuration). Both tables go with
their session (``ON DELETE CASCADE``). Not part of ``_schema``'s metadata: an FTS5 table has
no SQLAlchemy model, so the drift test leaves the ``evs_memory`` tables out and
``tests/eventstore/test_memory_index.py`` checks them.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SESSIONS = """
CREATE TABLE evs_memory_sessions (
  session_id VARCHAR(255) NOT NULL PRIMARY KEY
    REFERENCES evs_sessions (session_id) ON DELETE CASCADE,
  app_name VARCHAR(255) NOT NULL,
  user_id VARCHAR(255) NOT NULL,
  upto_seq INTEGER NOT NULL,
  added_at FLOAT NOT NULL
)
"""

_ROW_COLUMNS = """
  session_id VARCHAR(255) NOT NULL REFERENCES evs_sessions (session_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  app_name VARCHAR(255) NOT NULL,
  user_id VARCHAR(255) NOT NULL,
  author VARCHAR(255) NOT NULL,
  timestamp FLOAT NOT NULL,
  text TEXT NOT NULL
"""


def _upgrade_sqlite() -> None:
    op.execute(_SESSIONS)
    op.execute(f"CREATE TABLE evs_memory_rows (id INTEGER PRIMARY KEY, {_ROW_COLUMNS})")
    op.execute(
        "CREATE VIRTUAL TABLE evs_memory_fts USING fts5(text, content='evs_memory_rows', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
    )
    op.execute(
        "CREATE TRIGGER evs_memory_rows_ai AFTER INSERT ON evs_memory_rows BEGIN "
        "INSERT INTO evs_memory_fts (rowid, text) VALUES (new.id, new.text); END"
    )
    op.execute(
        "CREATE TRIGGER evs_memory_rows_ad AFTER DELETE ON evs_memory_rows BEGIN "
        "INSERT INTO evs_memory_fts (evs_memory_fts, rowid, text) "
        "VALUES ('delete', old.id, old.text); END"
    )


def _upgrade_postgres() -> None:
    op.execute(_SESSIONS)
    op.execute(
        f"CREATE TABLE evs_memory_rows (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        f"{_ROW_COLUMNS}, tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED)"
    )
    op.execute("CREATE INDEX ix_evs_memory_rows_tsv ON evs_memory_rows USING gin (tsv)")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _upgrade_sqlite()
    else:
        _upgrade_postgres()
    op.execute("CREATE INDEX ix_evs_memory_rows_session ON evs_memory_rows (session_id, seq)")
    op.execute("CREATE INDEX ix_evs_memory_rows_scope ON evs_memory_rows (app_name, user_id)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER evs_memory_rows_ad")
        op.execute("DROP TRIGGER evs_memory_rows_ai")
        op.execute("DROP TABLE evs_memory_fts")
    op.execute("DROP TABLE evs_memory_rows")
    op.execute("DROP TABLE evs_memory_sessions")
