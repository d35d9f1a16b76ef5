"""Caches bound to what they fold, artifact versions and fork links inside the evidence.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03

- ``evs_snapshots`` and ``evs_shared_snapshots`` get ``chain_hash`` and ``mac``: a session
  snapshot names the chain hash of the event at its seq, a scope's snapshot the chain hash of
  the stream entry it folds up to (at its position); a reader uses a row only while the log
  holds that hash there and, on a keyed store, the row's MAC is the key's
  (``eventstore._chain``). The rows stored before this revision name nothing, so the upgrade
  deletes them (they are caches: the next reads fold the log and write bound ones).
- ``evs_artifacts`` gets ``digest`` and ``signature``: the upgrade backfills every stored
  version's ``artifact_digest`` (no signature: the migration has no key), so an edit made after
  the upgrade is found; what was edited before it cannot be told apart.
- ``evs_session_forks`` gets ``link_hash`` and ``signature``: the upgrade backfills
  ``fork_link_digest`` of every link (unsigned, likewise).

- PostgreSQL: ``evs_append`` (revision 0019) numbers the events it writes (which change no
  shared state) after the larger of the app's counter and the highest position the app's
  shared-state events hold (one seek in their unique index), as the client's appends do: a
  counter lowered behind the store's back hands out no position below the log's.

The downgrade drops the columns (and with them the bindings: the older code reads the rows as
it did) and restores revision 0019's function. Must match ``eventstore/_schema.py``;
``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

from eventstore._chain import artifact_digest, fork_link_digest

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("evs_snapshots", "chain_hash"), ("evs_snapshots", "mac"),
    ("evs_shared_snapshots", "chain_hash"), ("evs_shared_snapshots", "mac"),
    ("evs_artifacts", "digest"), ("evs_artifacts", "signature"),
    ("evs_session_forks", "link_hash"), ("evs_session_forks", "signature"),
)

_BATCH = 500

_POSITION_0019 = """  SELECT coalesce(max(position), 0) INTO app_position
    FROM evs_app_positions WHERE app_name = s_app;"""
_POSITION = """  app_position := greatest(
    (SELECT coalesce(max(position), 0) FROM evs_app_positions WHERE app_name = s_app),
    (SELECT coalesce(max(position), 0) FROM evs_events
     WHERE app_name = s_app AND shared_state));"""


def _revision_0019() -> Any:
    path = Path(__file__).with_name("0019_append_owner.py")
    spec = importlib.util.spec_from_file_location("evs_migration_0019", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function() -> str:
    """Revision 0019's ``evs_append`` with the position taken as the log allows."""
    create = str(_revision_0019()._CREATE)
    assert _POSITION_0019 in create
    return create.replace(_POSITION_0019, _POSITION)


def _backfill_artifacts(bind: sa.Connection) -> None:
    keys = bind.execute(sa.text(
        "SELECT app_name, user_id, session_scope, filename, version FROM evs_artifacts "
        "ORDER BY app_name, user_id, session_scope, filename, version")).all()
    select = sa.text(
        "SELECT mime_type, data, created_at, custom_metadata FROM evs_artifacts "
        "WHERE app_name = :a AND user_id = :u AND session_scope = :s AND filename = :f "
        "AND version = :v")
    update = sa.text(
        "UPDATE evs_artifacts SET digest = :d WHERE app_name = :a AND user_id = :u "
        "AND session_scope = :s AND filename = :f AND version = :v")
    out: list[dict[str, object]] = []
    for app, user, scope, filename, version in keys:
        where = {"a": app, "u": user, "s": scope, "f": filename, "v": version}
        row = bind.execute(select, where).one()  # one at a time: artifacts may be large
        try:
            digest = artifact_digest(
                filename, version=int(version), mime_type=row[0], created_at=row[2],
                metadata=None if row[3] is None else bytes(row[3]), data=bytes(row[1]))
        except (ValueError, TypeError):
            continue  # a damaged row stays unverified
        out.append({**where, "d": digest})
        if len(out) >= _BATCH:
            bind.execute(update, out)
            out.clear()
    if out:
        bind.execute(update, out)


def _backfill_forks(bind: sa.Connection) -> None:
    rows = bind.execute(sa.text(
        "SELECT session_id, origin_session_id, origin_seq, forked_at FROM evs_session_forks"
    )).all()
    params = []
    for sid, origin, seq, at in rows:
        try:
            params.append({"sid": sid, "h": fork_link_digest(sid, origin, int(seq), at)})
        except (ValueError, TypeError):
            continue
    if params:
        bind.execute(sa.text("UPDATE evs_session_forks SET link_hash = :h WHERE session_id = :sid"),
                     params)


def upgrade() -> None:
    for table, column in _COLUMNS:
        op.add_column(table, sa.Column(column, sa.LargeBinary(), nullable=True))
    bind = op.get_bind()
    # Unbound caches: dropped, rebuilt by the next reads.
    op.execute("DELETE FROM evs_snapshots")
    op.execute("DELETE FROM evs_shared_snapshots")
    _backfill_artifacts(bind)
    _backfill_forks(bind)
    if bind.dialect.name == "postgresql":
        # One transaction (PostgreSQL's DDL is transactional): no caller sees neither function.
        op.execute(_revision_0019()._DROP)
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        revision_0019 = _revision_0019()
        op.execute(revision_0019._DROP)
        op.execute(revision_0019._CREATE)
    # Plain ALTER TABLE … DROP COLUMN (SQLite >= 3.35, PostgreSQL): no table rebuild.
    for table, column in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
