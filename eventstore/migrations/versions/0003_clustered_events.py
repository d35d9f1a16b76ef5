"""Events keyed by ``row_key = session_key << 32 | seq``: each session's events stored together.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Sessions get a small integer ``session_key``. Events get the primary key ``row_key``, which
makes ``(session, seq)`` unique by itself, so the ``(session_id, seq)`` unique index goes: an
append writes the row and one index (the event-id guard) instead of the row and two indexes.
``position`` stops being a global identity: each app's shared-state events are numbered by
``evs_app_positions`` and every other event takes its app's current number (see
``StoredEvent.position``). On SQLite ``row_key`` is the rowid (the events table is rebuilt,
every row copied with the same values) and positions are renumbered per app, so the
shared-state snapshots, a droppable cache keyed by position, are cleared; on PostgreSQL the
positions keep their values and the apps' counters start at their largest. Must match
``eventstore/_schema.py``: ``tests/eventstore/test_sql_schema.py`` checks it;
``tests/eventstore/test_sql_migrations.py`` migrates populated databases up and down.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "session_id, seq, event_id, kind, invocation_id, author, timestamp, shared_state, "
    "app_name, user_id, schema_version, payload"
)
_E_COLUMNS = ", ".join("e." + c.strip() for c in _COLUMNS.split(","))

# The columns as revision 0001 created them; only the keys change in this revision.
_SQLITE_EVENT_COLUMNS = """
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
  {keys},
  CONSTRAINT fk_evs_events_session FOREIGN KEY(session_id)
    REFERENCES evs_sessions (session_id) ON DELETE CASCADE,
  CONSTRAINT uq_evs_events_session_event UNIQUE (session_id, event_id)
"""


_SHARED_INDEX = "ON evs_events (app_name, position) WHERE shared_state"
"""Revision 0001 names it ix_evs_events_shared; from 0003 on it is unique, uq_evs_events_shared."""


def _sqlite_swap_events(key_columns: str, keys: str, copy: str, *, shared_index: str) -> None:
    # Nothing references evs_events, so dropping it is safe even where foreign keys are
    # enforced; evs_sessions, which other tables reference, is only altered in place.
    columns = _SQLITE_EVENT_COLUMNS.format(keys=keys)
    op.execute(f"CREATE TABLE evs_events_next ({key_columns},{columns})")
    op.execute(copy)
    op.execute("DROP TABLE evs_events")  # and its indexes
    op.execute("ALTER TABLE evs_events_next RENAME TO evs_events")
    op.execute(f"CREATE {shared_index} {_SHARED_INDEX}")
    op.execute("DELETE FROM evs_shared_snapshots")


def _create_app_positions() -> None:
    op.create_table(
        "evs_app_positions",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("app_name"),
    )
    # The largest position of any event of the app: every later shared-state event must come
    # after every event already stored.
    op.execute(
        "INSERT INTO evs_app_positions (app_name, position) "
        "SELECT app_name, max(position) FROM evs_events GROUP BY app_name"
    )


def _upgrade_sqlite() -> None:
    op.execute("ALTER TABLE evs_sessions ADD COLUMN session_key INTEGER NOT NULL DEFAULT 0")
    op.execute("UPDATE evs_sessions SET session_key = rowid")
    op.execute("CREATE UNIQUE INDEX uq_evs_sessions_key ON evs_sessions (session_key)")
    # position: how many shared-state events of the app up to and including this one, in the
    # old global order.
    _sqlite_swap_events(
        "row_key INTEGER NOT NULL, position BIGINT NOT NULL",
        "PRIMARY KEY (row_key)",
        f"INSERT INTO evs_events_next (row_key, position, {_COLUMNS}) "
        "SELECT (s.session_key << 32) | e.seq, "
        "sum(e.shared_state) OVER (PARTITION BY e.app_name ORDER BY e.position), "
        f"{_E_COLUMNS} FROM evs_events e JOIN evs_sessions s ON s.session_id = e.session_id "
        "ORDER BY 1",
        shared_index="UNIQUE INDEX uq_evs_events_shared",
    )
    _create_app_positions()


def _downgrade_sqlite() -> None:
    op.drop_table("evs_app_positions")
    # Rowids handed out in this order keep the order shared state needs: at each position the
    # shared-state event that took it first, then the events that saw it.
    _sqlite_swap_events(
        "position INTEGER NOT NULL",
        "PRIMARY KEY (position), CONSTRAINT uq_evs_events_session_seq UNIQUE (session_id, seq)",
        f"INSERT INTO evs_events_next ({_COLUMNS}) SELECT {_E_COLUMNS} FROM evs_events e "
        "ORDER BY e.position, e.shared_state DESC, e.row_key",
        shared_index="INDEX ix_evs_events_shared",
    )
    op.execute("DROP INDEX uq_evs_sessions_key")
    op.execute("ALTER TABLE evs_sessions DROP COLUMN session_key")


def _upgrade_postgres() -> None:
    op.execute(
        "ALTER TABLE evs_sessions ADD COLUMN session_key BIGINT GENERATED BY DEFAULT AS IDENTITY"
    )
    op.execute("CREATE UNIQUE INDEX uq_evs_sessions_key ON evs_sessions (session_key)")
    op.execute("ALTER TABLE evs_events ADD COLUMN row_key BIGINT")
    op.execute(
        "UPDATE evs_events e SET row_key = (s.session_key << 32) | e.seq "
        "FROM evs_sessions s WHERE s.session_id = e.session_id"
    )
    op.execute("ALTER TABLE evs_events ALTER COLUMN row_key SET NOT NULL")
    op.execute("ALTER TABLE evs_events DROP CONSTRAINT evs_events_pkey")
    op.execute("ALTER TABLE evs_events ADD CONSTRAINT evs_events_pkey PRIMARY KEY (row_key)")
    op.execute("ALTER TABLE evs_events DROP CONSTRAINT uq_evs_events_session_seq")
    op.execute("ALTER TABLE evs_events ALTER COLUMN position DROP IDENTITY")
    op.execute("DROP INDEX ix_evs_events_shared")
    op.execute(f"CREATE UNIQUE INDEX uq_evs_events_shared {_SHARED_INDEX}")
    _create_app_positions()


def _downgrade_postgres() -> None:
    op.drop_table("evs_app_positions")
    op.execute("DROP INDEX uq_evs_events_shared")
    op.execute(f"CREATE INDEX ix_evs_events_shared {_SHARED_INDEX}")
    # Positions become a unique identity again, numbered in the order shared state needs (at
    # each position the shared-state event that took it, then the events that saw it).
    op.execute(
        "UPDATE evs_events e SET position = r.n FROM (SELECT row_key, row_number() OVER "
        "(ORDER BY position, shared_state DESC, row_key) AS n FROM evs_events) r "
        "WHERE e.row_key = r.row_key"
    )
    op.execute("DELETE FROM evs_shared_snapshots")
    op.execute("ALTER TABLE evs_events ALTER COLUMN position ADD GENERATED BY DEFAULT AS IDENTITY")
    op.execute(
        "SELECT setval(pg_get_serial_sequence('evs_events', 'position'), "
        "(SELECT coalesce(max(position), 0) + 1 FROM evs_events), false)"
    )
    op.execute(
        "ALTER TABLE evs_events ADD CONSTRAINT uq_evs_events_session_seq UNIQUE (session_id, seq)"
    )
    op.execute("ALTER TABLE evs_events DROP CONSTRAINT evs_events_pkey")
    op.execute("ALTER TABLE evs_events ADD CONSTRAINT evs_events_pkey PRIMARY KEY (position)")
    op.execute("ALTER TABLE evs_events DROP COLUMN row_key")
    op.execute("DROP INDEX uq_evs_sessions_key")
    op.execute("ALTER TABLE evs_sessions DROP COLUMN session_key")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _upgrade_sqlite()
    else:
        _upgrade_postgres()


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _downgrade_sqlite()
    else:
        _downgrade_postgres()
