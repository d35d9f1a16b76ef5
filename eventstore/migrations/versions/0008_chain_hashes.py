"""Tamper evidence: a hash chain over every session's events, and each session's head.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30

Adds ``evs_events.chain_hash`` and ``evs_events.signature`` (nullable) and
``evs_sessions.head_seq`` / ``head_hash`` / ``head_signature``, then backfills in place: for
each session, in ``seq`` order and in batches, the chain hash of every stored row
(``eventstore._chain``) and the session's head. The backfill vouches for the log as it is at
migration time (a gap already there stays a ``seq_gap`` finding of ``evs verify``).
Signatures cannot be backfilled without the key: rows written before a keyed store wrote them
stay unsigned, and a keyed ``evs verify`` reports them as ``unsigned`` (README, "Tamper
evidence").

On PostgreSQL ``evs_append`` (revision 0007) is replaced by a version that takes each event's
content digest (computed by the client) and chains them with the built-in ``sha256(bytea)``,
still in one statement; it also checks that the session's head record agrees with its log.
``evs_sessions`` gets ``fillfactor = 50`` there, so the head update each append makes stays a
HOT update (no index maintenance).
The downgrade drops the columns and restores 0007's function.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import op

from eventstore._chain import GENESIS, chain_hashes
from eventstore.backends.sql import payload_bytes

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 2_000

_CREATE = r"""
CREATE FUNCTION evs_append(
  p_session_id varchar, p_lock_key integer, p_expected integer,
  p_event_ids varchar[], p_kinds varchar[], p_invocation_ids varchar[], p_authors varchar[],
  p_timestamps float8[], p_versions integer[], p_payloads bytea[], p_digests bytea[],
  OUT status integer, OUT version integer, OUT app_position bigint, OUT hashes bytea[]
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  s_app varchar; s_user varchar; s_key bigint; s_head integer; h bytea; newest bigint;
  i integer;
BEGIN
  PERFORM pg_advisory_xact_lock(1702261553, p_lock_key);
  SELECT app_name, user_id, session_key, head_seq, head_hash
    INTO s_app, s_user, s_key, s_head, h
    FROM evs_sessions WHERE session_id = p_session_id;
  IF NOT FOUND THEN
    status := 1; version := 0; app_position := 0;
    RETURN;
  END IF;
  SELECT max(row_key) INTO newest FROM evs_events
    WHERE row_key > s_key << 32 AND row_key < (s_key + 1) << 32;
  version := coalesce(newest & 4294967295, 0)::integer;
  IF version <> s_head OR (p_expected IS NOT NULL AND p_expected <> version) OR EXISTS (
      SELECT 1 FROM evs_events WHERE session_id = p_session_id
        AND event_id = ANY (p_event_ids)) THEN
    status := 2; app_position := 0;
    RETURN;
  END IF;
  h := coalesce(h, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
  hashes := ARRAY[]::bytea[];
  FOR i IN 1 .. cardinality(p_digests) LOOP
    h := sha256(h || int8send((version + i)::bigint) || p_digests[i]);
    hashes := array_append(hashes, h);
  END LOOP;
  SELECT coalesce(max(position), 0) INTO app_position
    FROM evs_app_positions WHERE app_name = s_app;
  INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, invocation_id,
    author, timestamp, shared_state, app_name, user_id, schema_version, payload, chain_hash)
  SELECT (s_key << 32) | (version + t.n), app_position, p_session_id, version + t.n,
    t.event_id, t.kind, t.invocation_id, t.author, t.ts, false, s_app, s_user, t.sv,
    t.payload, t.hash
  FROM unnest(p_event_ids, p_kinds, p_invocation_ids, p_authors, p_timestamps, p_versions,
              p_payloads, hashes) WITH ORDINALITY AS t(event_id, kind, invocation_id, author,
                                                       ts, sv, payload, hash, n);
  UPDATE evs_sessions SET head_seq = version + cardinality(p_digests), head_hash = h,
    head_signature = NULL WHERE session_id = p_session_id;
  status := 0;
END;
$$
"""

_DROP = (
    "DROP FUNCTION IF EXISTS evs_append(varchar, integer, integer, varchar[], varchar[], "
    "varchar[], varchar[], float8[], integer[], bytea[], bytea[])"
)


def _revision_0007() -> Any:
    """Revision 0007's module (its function is what the downgrade restores)."""
    path = Path(__file__).with_name("0007_append_function.py")
    spec = importlib.util.spec_from_file_location("evs_revision_0007", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Row:
    """One stored row as the chain reads it."""

    __slots__ = ("author", "event_id", "invocation_id", "kind", "payload", "schema_version",
                 "shared_state", "timestamp")

    def __init__(self, row: Sequence[Any]) -> None:
        (self.event_id, self.invocation_id, self.author, self.kind, timestamp, shared,
         version, payload) = row
        self.timestamp = float(timestamp)
        self.shared_state = bool(shared)
        self.schema_version = int(version)
        self.payload = payload_bytes(payload)


def _backfill(bind: sa.Connection) -> None:
    sessions = bind.execute(
        sa.text("SELECT session_id, session_key FROM evs_sessions ORDER BY session_key")
    ).all()
    select = sa.text(
        "SELECT row_key, seq, event_id, invocation_id, author, kind, timestamp, shared_state, "
        "schema_version, payload FROM evs_events WHERE row_key > :low AND row_key < :high "
        "ORDER BY row_key LIMIT :n"
    )
    update_row = sa.text("UPDATE evs_events SET chain_hash = :h WHERE row_key = :k")
    update_head = sa.text(
        "UPDATE evs_sessions SET head_seq = :seq, head_hash = :h WHERE session_id = :sid"
    )
    for session_id, key in sessions:
        prev, head_seq, low, high = GENESIS, 0, key << 32, (key + 1) << 32
        while True:
            rows = bind.execute(select, {"low": low, "high": high, "n": _BATCH}).all()
            if not rows:
                break
            updates = []
            for row in rows:
                (prev,) = chain_hashes(prev, int(row[1]), [_Row(row[2:])])
                head_seq = int(row[1])
                updates.append({"h": prev, "k": row[0]})
            bind.execute(update_row, updates)
            low = rows[-1][0]
        if head_seq:
            bind.execute(update_head, {"seq": head_seq, "h": prev, "sid": session_id})


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("evs_events", sa.Column("chain_hash", sa.LargeBinary(), nullable=True))
    op.add_column("evs_events", sa.Column("signature", sa.LargeBinary(), nullable=True))
    op.add_column("evs_sessions", sa.Column("head_seq", sa.Integer(), nullable=False,
                                            server_default="0"))
    op.add_column("evs_sessions", sa.Column("head_hash", sa.LargeBinary(), nullable=True))
    op.add_column("evs_sessions", sa.Column("head_signature", sa.LargeBinary(), nullable=True))
    _backfill(bind)
    if bind.dialect.name == "postgresql":
        op.execute(_revision_0007()._DROP)
        op.execute(_CREATE)
        # Every append now updates its session's row: room on each page keeps those updates
        # HOT (no index entries written for them).
        op.execute("ALTER TABLE evs_sessions SET (fillfactor = 50)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(_DROP)
        op.execute(_revision_0007()._CREATE)
        op.execute("ALTER TABLE evs_sessions RESET (fillfactor)")
    # Plain ALTER TABLE … DROP COLUMN (SQLite >= 3.35, PostgreSQL): no table rebuild.
    for table, column in (("evs_events", "chain_hash"), ("evs_events", "signature"),
                          ("evs_sessions", "head_seq"), ("evs_sessions", "head_hash"),
                          ("evs_sessions", "head_signature")):
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
