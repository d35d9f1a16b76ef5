"""SQLite: events stored in commit order, ``row_key`` a unique index instead of the rowid.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

Since revision 0003 the SQLite events table was keyed by ``row_key`` (``session_key << 32 |
seq``), so a session's rows sat together. Many sessions appending at once then insert in as
many places in the middle of the table: SQLite splits and rebalances a full page there (three
sibling pages rewritten, the parent too), where an insert at the end of a table fills the last
page and starts a new one. Measured on a 2-core machine, a group commit of 64 interleaved
sessions' appends spent 42 µs of SQLite time per event keyed by session and 23 µs in commit
order with ``row_key`` as a unique index (the index entries are 16 bytes, so its pages split
rarely). One session alone pays for that index (one more B-tree insert and WAL page per
commit: its writer job 11 to 15 µs longer, 7 to 12% of an append, timed in place).

So on SQLite the table gets a rowid ``id`` in commit order and ``row_key`` keeps its meaning and
uniqueness through ``uq_evs_events_row_key``; every query still addresses events by
``row_key``. Rows are copied in ``row_key`` order, every column unchanged. PostgreSQL stores
rows in insertion order anyway (a heap, ``row_key`` its primary-key index): nothing changes
there. Downgrading copies the rows back under ``row_key`` as the rowid.
``tests/eventstore/test_events_layout_migration.py`` migrates populated files up and down.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "row_key, position, session_id, seq, event_id, kind, invocation_id, author, timestamp, "
    "shared_state, app_name, user_id, schema_version, payload, chain_hash, signature"
)

# The columns as revisions 0003 and 0008 left them; only the key changes here.
_EVENT_COLUMNS = """
  row_key INTEGER NOT NULL,
  position BIGINT NOT NULL,
  session_id VARCHAR(255) NOT NULL,
  seq INTEGER NOT NULL,
  event_id VARCHAR(255) NOT NULL,
  kind VARCHAR(64) NOT NULL,
  invocation_id VARCHAR(255) NOT NULL,
  author VARCHAR(255) NOT NULL,
  timestamp FLOAT NOT NULL,
  shared_state BOOLEAN NOT NULL,
  app_name VARCHAR(255) NOT NULL,
  user_id VARCHAR(255) NOT NULL,
  schema_version INTEGER NOT NULL,
  payload BLOB NOT NULL,
  chain_hash BLOB,
  signature BLOB,
  {keys}
  CONSTRAINT fk_evs_events_session FOREIGN KEY(session_id)
    REFERENCES evs_sessions (session_id) ON DELETE CASCADE,
  CONSTRAINT uq_evs_events_session_event UNIQUE (session_id, event_id)
"""

_SHARED_INDEX = (
    "CREATE UNIQUE INDEX uq_evs_events_shared ON evs_events (app_name, position) "
    "WHERE shared_state"
)


def _swap(first_column: str, keys: str) -> None:
    # pysqlite runs a CREATE TABLE before any row change outside the transaction that follows:
    # an upgrade that stopped right after it left an empty copy behind, which goes first.
    op.execute("DROP TABLE IF EXISTS evs_events_next")
    # Nothing references evs_events, so dropping it is safe where foreign keys are enforced.
    op.execute(f"CREATE TABLE evs_events_next ({first_column}{_EVENT_COLUMNS.format(keys=keys)})")
    op.execute(f"INSERT INTO evs_events_next ({_COLUMNS}) "
               f"SELECT {_COLUMNS} FROM evs_events ORDER BY row_key")
    op.execute("DROP TABLE evs_events")  # and its indexes
    op.execute("ALTER TABLE evs_events_next RENAME TO evs_events")
    op.execute(_SHARED_INDEX)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _swap("id INTEGER PRIMARY KEY,", "")
    op.execute("CREATE UNIQUE INDEX uq_evs_events_row_key ON evs_events (row_key)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _swap("", "PRIMARY KEY (row_key),")
