"""The SQLite backend's retention SQL: plain functions of a connection, run on a driver thread.

Which sessions a prune selects (by last update, oldest first, a page at a time), the
conditional delete's version check, and the per-app policies (``evs_retention_policies``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from eventstore._retention import RetentionPolicy
from eventstore.backends.protocol import SessionRecord
from eventstore.backends.sql import NEWEST_ROW_KEY, SESSION_COLUMNS, session_record

__all__ = ["clear_policy", "policies", "set_policy", "updated_before", "version"]

_UPDATED = "coalesce(e.timestamp, s.created_at)"


def updated_before(
    conn: sqlite3.Connection, before: float, app_name: str | None,
    after: tuple[float, str] | None, limit: int,
) -> list[SessionRecord]:
    """Sessions last updated before ``before``, by ``(updated_at, session_id)`` after
    ``after``."""
    where = [f"{_UPDATED} < ?"]
    params: list[Any] = [before]
    if app_name is not None:
        where.append("s.app_name = ?")
        params.append(app_name)
    if after is not None:
        where.append(f"({_UPDATED}, s.session_id) > (?, ?)")
        params += list(after)
    params.append(limit)
    sql = (f"SELECT {SESSION_COLUMNS} FROM evs_sessions s "
           f"LEFT JOIN evs_events e ON e.row_key = {NEWEST_ROW_KEY} "
           f"WHERE {' AND '.join(where)} ORDER BY {_UPDATED}, s.session_id LIMIT ?")
    return [session_record(row) for row in conn.execute(sql, params)]


def version(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The session's version (the seq of its newest event), or None when it does not exist."""
    row = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM evs_sessions s LEFT JOIN evs_events e "
        f"ON e.row_key = {NEWEST_ROW_KEY} WHERE s.session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else session_record(row).version


def policies(conn: sqlite3.Connection) -> list[RetentionPolicy]:
    """Every stored policy, by app name."""
    return [
        RetentionPolicy(app_name=app, older_than=float(older), archive=archive,
                        set_at=float(set_at))
        for app, older, archive, set_at in conn.execute(
            "SELECT app_name, older_than, archive, set_at FROM evs_retention_policies "
            "ORDER BY app_name")
    ]


def set_policy(conn: sqlite3.Connection, policy: RetentionPolicy) -> None:
    """Store the app's policy, replacing its previous one."""
    conn.execute(
        "INSERT INTO evs_retention_policies (app_name, older_than, archive, set_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (app_name) DO UPDATE SET "
        "older_than = excluded.older_than, archive = excluded.archive, "
        "set_at = excluded.set_at",
        (policy.app_name, policy.older_than, policy.archive, policy.set_at),
    )


def clear_policy(conn: sqlite3.Connection, app_name: str | None) -> int:
    """Delete the app's policy (all of them for None); return how many went."""
    if app_name is None:
        return conn.execute("DELETE FROM evs_retention_policies").rowcount
    return conn.execute("DELETE FROM evs_retention_policies WHERE app_name = ?",
                        (app_name,)).rowcount
