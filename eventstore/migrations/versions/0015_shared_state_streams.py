"""Shared state as its own streams: ``evs_scope_entries`` and ``evs_scope_heads``.

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-02

``user:``/``app:`` state belongs to its scope, not to the sessions that wrote it: each scope —
an app's ``app:`` keys (user ``''``), an app's user's ``user:`` keys — gets a stream of
entries, one per event whose state delta touches it (``eventstore._scopes``), hash-chained
with the scope bound into each entry's digest. The fold of shared state reads only these, so
deleting a session no longer erases what it wrote, and ``evs verify`` checks the chains.

The backfill builds every stream from today's fold: each app's shared-state events
(``shared_state`` true; a fork's copies are false and count in their origin) in ``position``
order, each event's ``app:`` part into the app's stream and its ``user:`` part into the stream
of the user its row names. A row whose payload cannot be decoded gets no entry (``evs verify``
reports the event's missing entry). The migration has no signing key, so backfilled entries
and heads are unsigned: a keyed ``evs verify`` trusts an unsigned entry only when its origin
event still exists, is signed, and holds the same delta for the same scope (else it reports
``stream_unsigned``), and the first keyed append to a stream signs its head and an entry
whose chain hash covers everything before it.

``evs_shared_snapshots`` is emptied both ways: its ``event_count`` now counts stream entries.
Sessions deleted before this revision took their deltas with them (their events are gone):
no stream can hold those. The downgrade drops the two tables; revision 0013's fold of the
existing sessions' events takes over again, so the deltas of a session deleted since the
upgrade leave the fold then.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from eventstore._exceptions import CorruptEventError
from eventstore._scopes import ScopeWriter, scope_deltas
from eventstore._statefold import decode_stored
from eventstore.backends.sql import EVENT_COLUMNS, stored_events

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 2_000


def _create_tables() -> None:
    op.create_table(
        "evs_scope_entries",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("stream_seq", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("delta", sa.LargeBinary(), nullable=False),
        sa.Column("chain_hash", sa.LargeBinary(), nullable=True),
        sa.Column("signature", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("app_name", "user_id", "stream_seq"),
    )
    op.create_table(
        "evs_scope_heads",
        sa.Column("app_name", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("head_seq", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.LargeBinary(), nullable=True),
        sa.Column("head_signature", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("app_name", "user_id"),
    )


def _backfill(bind: sa.Connection) -> None:
    writer = ScopeWriter(lambda _app, _user: (0, None), None)  # every stream starts empty
    insert = sa.text(
        "INSERT INTO evs_scope_entries (app_name, user_id, stream_seq, position, session_id, "
        "seq, event_id, delta, chain_hash, signature) VALUES (:app, :user, :stream_seq, "
        ":position, :sid, :seq, :event_id, :delta, :chain_hash, NULL)"
    )

    def flush() -> None:
        if writer.entries:
            bind.execute(insert, [
                {"app": e.app_name, "user": e.user_id, "stream_seq": e.stream_seq,
                 "position": e.position, "sid": e.session_id, "seq": e.seq,
                 "event_id": e.event_id, "delta": e.delta, "chain_hash": e.chain_hash}
                for e in writer.entries])
            writer.entries.clear()

    apps = [row[0] for row in bind.execute(sa.text(
        "SELECT DISTINCT app_name FROM evs_events WHERE shared_state ORDER BY app_name"))]
    select = sa.text(
        f"SELECT session_id, user_id, {EVENT_COLUMNS} FROM evs_events WHERE app_name = :app "
        "AND shared_state AND position > :after ORDER BY position LIMIT :n"
    )
    for app in apps:
        after = 0
        while True:
            rows = bind.execute(select, {"app": app, "after": after, "n": _BATCH}).all()
            if not rows:
                break
            for row in rows:
                stored = stored_events(row[0], [row[2:]])[0]
                after = stored.position
                try:
                    actions = decode_stored(stored).actions
                except CorruptEventError:
                    continue  # no entry: verify names the event's missing one
                app_delta, user_delta = scope_deltas(actions)
                writer.add(app, row[1], session_id=stored.session_id, seq=stored.seq,
                           event_id=stored.event_id, position=stored.position,
                           app_delta=app_delta, user_delta=user_delta)
            flush()
    heads = [{"app": h.app_name, "user": h.user_id, "seq": h.head_seq, "hash": h.head_hash}
             for h in writer.heads()]
    if heads:
        bind.execute(sa.text(
            "INSERT INTO evs_scope_heads (app_name, user_id, head_seq, head_hash, "
            "head_signature) VALUES (:app, :user, :seq, :hash, NULL)"), heads)


def upgrade() -> None:
    _create_tables()
    op.execute("DELETE FROM evs_shared_snapshots")
    _backfill(op.get_bind())


def downgrade() -> None:
    op.drop_table("evs_scope_heads")
    op.drop_table("evs_scope_entries")
    op.execute("DELETE FROM evs_shared_snapshots")
