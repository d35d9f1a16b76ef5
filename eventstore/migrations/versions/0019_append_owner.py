"""PostgreSQL: ``evs_append`` judges the session's owner after it takes the session's lock.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02

The store keeps the key of each session it made or found; another process may delete that
session meanwhile, and the key may then be given to another (app, user)'s new session. So an
append names the (app, user) it means (``Backend.append``'s ``owner``). Until this revision the
one-statement append checked that owner in a join *before* calling ``evs_append``: between that
check and the function's lock on the session, another transaction could still delete the session
and hand its key to someone else's. The function now takes the owner, ``p_app`` and ``p_user``
(both NULL, their default: anyone's), and judges it on the session row it reads after the lock,
answering status 1 (no such session: SessionNotFoundError, nothing written) when that row is not
theirs. The defaults keep calls with the eleven arguments of revision 0010 meaning what they
meant, so a process opened before the upgrade goes on appending through it. Otherwise the
same statements, plans and results as revision 0010's; no table changes, SQLite has nothing to
do (its appends judge the owner inside their own transaction). The downgrade restores the
function of revision 0010.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ARGUMENTS_0010 = (
    "varchar, integer, integer, varchar[], varchar[], varchar[], varchar[], float8[], "
    "integer[], bytea[], bytea[]"
)
_DROP_0010 = f"DROP FUNCTION IF EXISTS evs_append({_ARGUMENTS_0010})"
_DROP = f"DROP FUNCTION IF EXISTS evs_append({_ARGUMENTS_0010}, varchar, varchar)"

# The first lock key is LOCK_SESSION in eventstore/backends/postgres/append.py ("evs1");
# the second key is computed by the caller.
_CREATE = r"""
CREATE FUNCTION evs_append(
  p_session_id varchar, p_lock_key integer, p_expected integer,
  p_event_ids varchar[], p_kinds varchar[], p_invocation_ids varchar[], p_authors varchar[],
  p_timestamps float8[], p_versions integer[], p_payloads bytea[], p_digests bytea[],
  p_app varchar DEFAULT NULL, p_user varchar DEFAULT NULL,
  OUT status integer, OUT version integer, OUT app_position bigint, OUT hashes bytea[]
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  s_app varchar; s_user varchar; s_key bigint; s_head integer; h bytea; newest bigint;
  i integer; one_id varchar;
BEGIN
  PERFORM pg_advisory_xact_lock(1702261553, p_lock_key);
  SELECT app_name, user_id, session_key, head_seq, head_hash
    INTO s_app, s_user, s_key, s_head, h
    FROM evs_sessions WHERE session_id = p_session_id;
  IF NOT FOUND OR (p_app IS NOT NULL
                   AND (s_app <> p_app OR s_user IS DISTINCT FROM p_user)) THEN
    status := 1; version := 0; app_position := 0;
    RETURN;
  END IF;
  SELECT row_key INTO newest FROM evs_events
    WHERE row_key > s_key << 32 AND row_key < (s_key + 1) << 32
    ORDER BY row_key DESC LIMIT 1;
  version := coalesce(newest & 4294967295, 0)::integer;
  IF version <> s_head OR (p_expected IS NOT NULL AND p_expected <> version) THEN
    status := 2; app_position := 0;
    RETURN;
  END IF;
  FOREACH one_id IN ARRAY p_event_ids LOOP
    IF EXISTS (SELECT 1 FROM evs_events
               WHERE session_id = p_session_id AND event_id = one_id) THEN
      status := 2; app_position := 0;
      RETURN;
    END IF;
  END LOOP;
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


def _function_of_0010() -> str:
    path = Path(__file__).with_name("0010_append_function_v2.py")
    spec = importlib.util.spec_from_file_location("evs_migration_0010", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module._CREATE)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # One transaction (PostgreSQL's DDL is transactional): no caller sees neither function.
        op.execute(_DROP_0010)
        op.execute(_CREATE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
        op.execute(_function_of_0010())
