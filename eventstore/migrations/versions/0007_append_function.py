"""PostgreSQL: the append as one server-side function, ``evs_append`` (one round trip).

Revision ID: 0007
Revises: 0003
Create Date: 2026-11-30

An append used to cost five round trips (``BEGIN``, the session's advisory lock, the head
query, the INSERT, ``COMMIT``). ``evs_append`` does the common case in one statement, run as
its own transaction: it takes the session's advisory lock (the same lock the backend's other
writes take), reads the head after it (READ COMMITTED: every statement of the function sees
what committed before it), and inserts the batch at the head with the app's committed position.
It does not NOTIFY: a notifying transaction holds a database-wide lock through its commit, so
the backend notifies tails after the commit instead. When the session is missing it returns
status 1; when the session is not at the expected version or holds one of the batch's ids it
returns status 2 and writes nothing, and the backend judges the case (a retry, a conflict, a
duplicate) on its slower path.
Batches that change ``user:``/``app:`` state keep the slower path (they take the app's lock and
advance its position counter). No table changes; SQLite has nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The first lock key is _LOCK_SESSION in eventstore/backends/postgres/base.py ("evs1");
# the second key is computed by the caller.
_CREATE = r"""
CREATE FUNCTION evs_append(
  p_session_id varchar, p_lock_key integer, p_expected integer,
  p_event_ids varchar[], p_kinds varchar[], p_invocation_ids varchar[], p_authors varchar[],
  p_timestamps float8[], p_versions integer[], p_payloads bytea[],
  OUT status integer, OUT version integer, OUT app_position bigint
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  s_app varchar; s_user varchar; s_key bigint; newest bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(1702261553, p_lock_key);
  SELECT app_name, user_id, session_key INTO s_app, s_user, s_key
    FROM evs_sessions WHERE session_id = p_session_id;
  IF NOT FOUND THEN
    status := 1; version := 0; app_position := 0;
    RETURN;
  END IF;
  SELECT max(row_key) INTO newest FROM evs_events
    WHERE row_key > s_key << 32 AND row_key < (s_key + 1) << 32;
  version := coalesce(newest & 4294967295, 0)::integer;
  IF (p_expected IS NOT NULL AND p_expected <> version) OR EXISTS (
      SELECT 1 FROM evs_events WHERE session_id = p_session_id
        AND event_id = ANY (p_event_ids)) THEN
    status := 2; app_position := 0;
    RETURN;
  END IF;
  SELECT coalesce(max(position), 0) INTO app_position
    FROM evs_app_positions WHERE app_name = s_app;
  INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, invocation_id,
    author, timestamp, shared_state, app_name, user_id, schema_version, payload)
  SELECT (s_key << 32) | (version + t.n), app_position, p_session_id, version + t.n,
    t.event_id, t.kind, t.invocation_id, t.author, t.ts, false, s_app, s_user, t.sv,
    t.payload
  FROM unnest(p_event_ids, p_kinds, p_invocation_ids, p_authors, p_timestamps, p_versions,
              p_payloads) WITH ORDINALITY AS t(event_id, kind, invocation_id, author, ts, sv,
                                               payload, n);
  status := 0;
END;
$$
"""

_DROP = (
    "DROP FUNCTION IF EXISTS evs_append(varchar, integer, integer, varchar[], varchar[], "
    "varchar[], varchar[], float8[], integer[], bytea[])"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_CREATE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
