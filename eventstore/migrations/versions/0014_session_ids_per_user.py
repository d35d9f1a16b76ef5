"""Session ids per (app, user): the id the app gave is its own column.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

Until this revision a session id was unique in the whole store, so a second user's session
``default`` could not be made. Now the triple (app, user, id the app gave) addresses a session.
``evs_sessions.session_id`` stays the store-unique key every other table (events, snapshots,
caches, fork links) and every signature names; the new column ``given_id`` holds the id the app
gave, unique with the app and user (``uq_evs_sessions_given``). Every existing session was
given its key, so the backfill copies it: nothing else changes, no event row is touched.

Downgrading drops the column. It refuses (and changes nothing) while a session's key differs
from the id the app gave it (two users share an id, or did): revision 0013 knows sessions by
their key only, so those sessions would lose the id their app addresses them by.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SHOWN = 5
"""How many of the sessions that block a downgrade its message names."""


def upgrade() -> None:
    op.add_column(
        "evs_sessions",
        sa.Column("given_id", sa.String(255), nullable=False, server_default=""),
    )
    op.execute("UPDATE evs_sessions SET given_id = session_id")
    op.create_index(
        "uq_evs_sessions_given", "evs_sessions", ["given_id", "app_name", "user_id"], unique=True
    )


def downgrade() -> None:
    rows = op.get_bind().execute(sa.text(
        "SELECT given_id, app_name, user_id, session_id FROM evs_sessions "
        "WHERE given_id <> session_id ORDER BY given_id, app_name, user_id"
    )).fetchall()
    if rows:
        shown = "; ".join(
            f"{given!r} of app {app!r}, user {user!r} (stored as {key!r})"
            for given, app, user, key in rows[:_SHOWN]
        )
        more = f" and {len(rows) - _SHOWN} more" if len(rows) > _SHOWN else ""
        raise RuntimeError(
            f"Cannot downgrade below revision 0014: {len(rows)} session(s) are stored under a "
            f"key other than the id their app gave them, because another user had (or has) a "
            f"session with that id: {shown}{more}. Revision 0013 knows sessions by that key "
            "only, so they would lose their ids. Delete or export them (evs export) first; "
            "nothing was changed."
        )
    op.drop_index("uq_evs_sessions_given", table_name="evs_sessions")
    # Plain DROP COLUMN (SQLite >= 3.35): a batch copy of evs_sessions would cascade-delete
    # the rows of every table whose foreign key names it.
    op.execute("ALTER TABLE evs_sessions DROP COLUMN given_id")
