"""The PostgreSQL backend's retention SQL: coroutines of an asyncpg connection.

Which sessions a prune selects (by last update, oldest first, a page at a time), the
conditional delete's version check (under the session's append lock), and the per-app policies
(``evs_retention_policies``).
"""

from __future__ import annotations

from typing import Any

from eventstore._retention import RetentionPolicy
from eventstore.backends.protocol import SessionRecord
from eventstore.backends.sql import NEWEST_ROW_KEY, SESSION_COLUMNS, session_record

from .append import LOCK_SESSION, lock_key

__all__ = ["clear_policy", "locked_version", "policies", "set_policy", "updated_before"]

_UPDATED = "coalesce(e.timestamp, s.created_at)"


async def updated_before(
    conn: Any, before: float, app_name: str | None, after: tuple[float, str] | None,
    limit: int,
) -> list[SessionRecord]:
    """Sessions last updated before ``before``, by ``(updated_at, session_id)`` after
    ``after``."""
    params: list[Any] = [before]
    where = [f"{_UPDATED} < $1"]
    if app_name is not None:
        params.append(app_name)
        where.append(f"s.app_name = ${len(params)}")
    if after is not None:
        params += list(after)
        where.append(f"({_UPDATED}, s.session_id) > (${len(params) - 1}::float8, "
                     f"${len(params)}::varchar)")
    params.append(limit)
    sql = (f"SELECT {SESSION_COLUMNS} FROM evs_sessions s "
           f"LEFT JOIN evs_events e ON e.row_key = {NEWEST_ROW_KEY} "
           f"WHERE {' AND '.join(where)} ORDER BY {_UPDATED}, s.session_id "
           f"LIMIT ${len(params)}")
    return [session_record(row) for row in await conn.fetch(sql, *params)]


async def locked_version(conn: Any, session_id: str) -> int | None:
    """Take the session's append lock (until the transaction ends) and return its version,
    read after the lock (so it counts every append that committed meanwhile); None when it
    does not exist."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_SESSION,
                       lock_key(session_id))
    row = await conn.fetchrow(
        f"SELECT {SESSION_COLUMNS} FROM evs_sessions s LEFT JOIN evs_events e "
        f"ON e.row_key = {NEWEST_ROW_KEY} WHERE s.session_id = $1", session_id)
    return None if row is None else session_record(row).version


async def policies(conn: Any) -> list[RetentionPolicy]:
    """Every stored policy, by app name."""
    rows = await conn.fetch("SELECT app_name, older_than, archive, set_at "
                            "FROM evs_retention_policies ORDER BY app_name")
    return [RetentionPolicy(app_name=r[0], older_than=float(r[1]), archive=r[2],
                            set_at=float(r[3])) for r in rows]


async def set_policy(conn: Any, policy: RetentionPolicy) -> None:
    """Store the app's policy, replacing its previous one."""
    await conn.execute(
        "INSERT INTO evs_retention_policies (app_name, older_than, archive, set_at) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (app_name) DO UPDATE SET "
        "older_than = excluded.older_than, archive = excluded.archive, "
        "set_at = excluded.set_at",
        policy.app_name, policy.older_than, policy.archive, policy.set_at,
    )


async def clear_policy(conn: Any, app_name: str | None) -> int:
    """Delete the app's policy (all of them for None); return how many went."""
    if app_name is None:
        status = await conn.execute("DELETE FROM evs_retention_policies")
    else:
        status = await conn.execute("DELETE FROM evs_retention_policies WHERE app_name = $1",
                                    app_name)
    return int(status.split()[-1])
