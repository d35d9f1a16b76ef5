"""Each session's own state at head, one row per session: ``evs_head_states``.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

Listing many sessions with their state (``list_sessions_by_update``, ADK's ``list_sessions``)
read every event of every session without a snapshot to fold its state. ``evs_head_states``
keeps, per session, the fold of its session-scoped state up to the newest seq a listing folded,
with the chain hash of the event at that seq: a row counts only while that event still has that
hash (which covers every event before it), so a listing reads one row per session plus the
events appended since. It is a cache like ``evs_snapshots``: it goes with the session
(``ON DELETE CASCADE``), is dropped by ``evs db rebuild-snapshots``, is not copied by ``fork``
and ``evs verify`` checks it against the fold of the log.

The backfill folds every session's events once, in ``row_key`` order, and writes a row at the
session's newest event (unsigned: a keyed store folds the log instead of trusting it, and
writes a signed row at its next listing). A session whose events cannot be decoded, or have no
chain hash, gets no row. The downgrade drops the table. Must match ``eventstore/_schema.py``;
``tests/eventstore/test_sql_schema.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

from eventstore._exceptions import CorruptEventError
from eventstore._statefold import fold_session_rows
from eventstore.backends.protocol import StoredEvent
from eventstore.backends.sql import EVENT_COLUMNS, stored_events

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 5_000


def _backfill(bind: sa.Connection) -> None:
    insert = sa.text(
        "INSERT INTO evs_head_states (session_id, seq, chain_hash, state, mac) "
        "VALUES (:sid, :seq, :chain_hash, :state, NULL)"
    )
    select = sa.text(
        f"SELECT row_key, session_id, {EVENT_COLUMNS} FROM evs_events "
        "WHERE row_key > :after ORDER BY row_key LIMIT :n"
    )
    rows_out: list[dict[str, Any]] = []
    current: str | None = None
    last: StoredEvent | None = None
    state: dict[str, Any] = {}
    broken = False

    def finish() -> None:
        if current is not None and last is not None and not broken \
                and last.chain_hash is not None:
            rows_out.append({"sid": current, "seq": last.seq, "chain_hash": last.chain_hash,
                             "state": orjson.dumps(state)})

    after = -1
    while True:
        rows = bind.execute(select, {"after": after, "n": _BATCH}).all()
        if not rows:
            break
        for row in rows:
            after = int(row[0])
            stored = stored_events(row[1], [row[2:]])[0]
            if stored.session_id != current:
                finish()
                current, last, state, broken = stored.session_id, None, {}, False
            if broken:
                continue
            if stored.seq != (0 if last is None else last.seq) + 1:
                broken = True  # out of order: verify names it; the listing folds the log
                continue
            try:
                fold_session_rows(state, [stored])
            except CorruptEventError:
                broken = True
                continue
            last = stored
        if len(rows_out) >= _BATCH:
            bind.execute(insert, rows_out)
            rows_out.clear()
    finish()
    if rows_out:
        bind.execute(insert, rows_out)


def upgrade() -> None:
    op.create_table(
        "evs_head_states",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("chain_hash", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("mac", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["evs_sessions.session_id"], ondelete="CASCADE",
            name="fk_evs_head_states_session",
        ),
        sa.PrimaryKeyConstraint("session_id"),
    )
    _backfill(op.get_bind())


def downgrade() -> None:
    op.drop_table("evs_head_states")
