"""The shared base of the SQL backends (as Django's ``db/backends/base/``): what SQLite and
PostgreSQL do alike, said once.

``SQLBackendBase`` implements the protocol's methods that only hand a job to one of the
backend's rooms (``reads``, ``snapshots``, ``artifacts``, ``memory_index``, ``retention``,
``fork``: the same room names in both packages, holding the SQL that differs) and run it as a
read or a write, through the hooks ``jobs.SQLJobs`` declares and each backend implements (how
it runs a job, a statement, a range read, a cache write); it overrides only what differs.
The statements both dialects write alike are here, with ``?`` placeholders (a driver with
numbered ones converts them: ``numbered``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventstore._fork import ForkLink, ForkPlan
from eventstore._retention import RetentionPolicy

from ..protocol import (
    ArtifactRecord,
    EventRow,
    HeadState,
    ImportedLink,
    MemoryRow,
    NewArtifact,
    NewEvent,
    ScopeEntry,
    ScopeHead,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
    check_batch_ids,
)
from .jobs import RangeRead, SQLJobs, numbered
from .rows import (
    APP_POSITIONS_SQL,
    MAX_POSITION,
    NEWEST_ROW_KEY,
    SCOPE_COLUMNS,
    SCOPE_HEAD_COLUMNS,
    SESSION_COLUMNS,
    artifact_scope,
    event_rows,
    scope,
    scope_entries,
    scope_heads,
    session_record,
    shared_scope,
    stored_events,
)

__all__ = ["SESSION_SQL", "RangeRead", "SQLBackendBase", "numbered"]

SESSION_SQL = f"""
SELECT {SESSION_COLUMNS} FROM evs_sessions s
LEFT JOIN evs_events e ON e.row_key = {NEWEST_ROW_KEY}
"""
"""A session's record (``session_record``) with its newest event; add the WHERE clause."""
_SESSION_BY_ID = f"{SESSION_SQL} WHERE s.session_id = ?"
_SCOPE_SQL = (
    "SELECT e.seq, e.app_name, e.user_id FROM evs_events e JOIN evs_sessions s "
    "ON s.session_id = e.session_id WHERE e.session_id = ? "
    "AND (e.app_name <> s.app_name OR e.user_id <> s.user_id) ORDER BY e.seq"
)
_SIGNED_HEAD_SQL = "SELECT 1 FROM evs_sessions WHERE head_signature IS NOT NULL LIMIT 1"
_STREAM_SQL = (
    f"SELECT {SCOPE_COLUMNS} FROM evs_scope_entries WHERE app_name = ? AND user_id = ? "
    "AND stream_seq > ? AND position <= ? ORDER BY stream_seq"
)
_STREAM_HEADS_SQL = (
    f"SELECT {SCOPE_HEAD_COLUMNS} FROM evs_scope_heads ORDER BY app_name, user_id"
)
_ARTIFACT_SCOPES_SQL = (
    "SELECT DISTINCT app_name, user_id, session_scope FROM evs_artifacts {where}"
    "ORDER BY app_name, user_id, session_scope LIMIT ?"
)
_AFTER_SCOPE = "WHERE (app_name, user_id, session_scope) > (?, ?, ?) "
_IMPORTED_SQL = (
    "SELECT seq, chain_hash, signature, origin_session_id FROM evs_imported_chain "
    "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)


class SQLBackendBase(SQLJobs):
    """What both SQL backends do alike: the protocol's methods that delegate to a room, run
    through the hooks of ``SQLJobs``."""

    async def create_session(
        self,
        record: SessionRecord,
        initial: Sequence[NewEvent],
        artifacts: Sequence[NewArtifact] = (),
        imported: Sequence[ImportedLink] = (),
    ) -> str:
        check_batch_ids(record.id, initial)
        return await self._create_session(record, initial, artifacts, imported)

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        check_batch_ids(session_id, events)
        return await self._append(session_id, events, expected_version, owner)

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None,
        filename: str,
        mime_type: str,
        data: bytes,
        created_at: float,
        metadata: bytes | None = None,
    ) -> int:
        return await self._save_artifact((app_name, user_id, scope(session_id), filename),
                                         mime_type=mime_type, data=data,
                                         created_at=created_at, metadata=metadata)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        return await self._delete_artifact((app_name, user_id, scope(session_id), filename))

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> str:
        return await self._write_job(
            lambda conn: self._forks.fork(conn, record, plan, self.signing_key),
            what=f"fork session {plan.origin_session_id!r}", session_id=record.id)

    async def fork_links(self, session_id: str) -> list[ForkLink]:
        return await self._read_job(lambda conn: self._forks.links(conn, session_id),
                                    what=f"read the fork links of session {session_id!r}")

    async def find_sessions(
        self, given_id: str, *, app_name: str | None, user_id: str | None
    ) -> list[SessionRecord]:
        sql = f"{SESSION_SQL} WHERE s.given_id = ?"
        params: list[Any] = [given_id]
        if app_name is not None:
            sql += " AND s.app_name = ?"
            params.append(app_name)
        if user_id is not None:
            sql += " AND s.user_id = ?"
            params.append(user_id)
        sql += " ORDER BY s.app_name, s.user_id"
        return [session_record(row) for row in await self._fetch(
            sql, params, what=f"find session {given_id!r}")]

    async def read(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        return await self._read_range(session_id, stored_events, plain=False,
                                      backwards=backwards, after=after, upto=upto, limit=limit,
                                      owner=owner)

    async def read_rows(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[EventRow]:
        return await self._read_range(session_id, event_rows, plain=True,
                                      backwards=backwards, after=after, upto=upto, limit=limit,
                                      owner=owner)

    async def drop_snapshots(self) -> int:
        return await self._write_job(self._snapshots.drop_all, what="drop snapshots")

    async def save_snapshot(self, session_id: str, snapshot: HeadState) -> None:
        await self._cache_write(lambda conn: self._snapshots.save(conn, session_id, snapshot),
                                what=f"save a snapshot of session {session_id!r}",
                                session_id=session_id)

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        owner: tuple[str, str] | None = None,
    ) -> None:
        await self._cache_write(
            lambda conn: self._snapshots.save_cache(conn, session_id, name, seq, data, owner),
            what=f"save cache {name!r} of session {session_id!r}", session_id=session_id)

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        # In a transaction: SQLite counts inside it, so a concurrent delete cannot slip in.
        await self._cache_write(
            lambda conn: self._snapshots.save_shared(conn, app_name, user_id, snapshot),
            what=f"save a shared-state snapshot of app {app_name!r}", transaction=True)

    async def save_head_states(self, states: Mapping[str, HeadState]) -> None:
        if not states:
            return
        await self._cache_write(lambda conn: self._snapshots.save_head_states(conn, states),
                                what="save head states", transaction=True)

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> HeadState | None:
        return await self._read_job(lambda conn: self._snapshots.load(conn, session_id, upto),
                                    what=f"load a snapshot of session {session_id!r}")

    async def load_cache(
        self, session_id: str, name: str, *, owner: tuple[str, str] | None = None
    ) -> tuple[int, bytes] | None:
        return await self._read_job(
            lambda conn: self._snapshots.load_cache(conn, session_id, name, owner),
            what=f"load cache {name!r} of session {session_id!r}")

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        return await self._read_job(
            lambda conn: self._snapshots.load_shared(conn, app_name, user_id, upto_position),
            what=f"load a shared-state snapshot of app {app_name!r}",
        )

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._read_job(lambda conn: self._artifacts_sql.load(conn, key, version),
                                    what=f"load artifact {filename!r}")

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        return await self._read_job(
            lambda conn: self._artifacts_sql.list_versions(conn, app_name, user_id,
                                                           scope(session_id)),
            what="list artifacts",
        )

    async def index_memory(
        self, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
        rows: Sequence[MemoryRow], added_at: float,
    ) -> bool:
        return await self._write_job(
            lambda conn: self._memory.index(conn, app_name=app_name, user_id=user_id,
                                      session_id=session_id, upto_seq=upto_seq, rows=rows,
                                      added_at=added_at),
            what=f"add session {session_id!r} to memory", session_id=session_id,
        )

    async def search_memory(
        self, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
    ) -> list[MemoryRow]:
        return await self._read_job(
            lambda conn: self._memory.search(conn, app_name=app_name, user_id=user_id,
                                             terms=terms, limit=limit),
            what="search memory", stale_ok=True,
        )

    async def remembered_sessions(self) -> list[tuple[str, str, str, int]]:
        return await self._read_job(self._memory.remembered, what="list remembered sessions")

    async def memory_rows(self, session_id: str) -> list[MemoryRow]:
        return await self._read_job(lambda conn: self._memory.rows_of(conn, session_id),
                                    what=f"read the memory of session {session_id!r}")

    async def clear_memory_rows(self) -> int:
        return await self._write_job(self._memory.clear_rows, what="clear memory rows")

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._read_job(lambda conn: self._artifacts_sql.versions(conn, key),
                                    what=f"list versions of artifact {filename!r}")

    async def artifact_scopes(
        self, *, after: tuple[str, str, str | None] | None, limit: int
    ) -> list[tuple[str, str, str | None]]:
        where, params = "", list[Any]([limit])
        if after is not None:
            where, params = _AFTER_SCOPE, [after[0], after[1], scope(after[2]), limit]
        rows = await self._fetch(_ARTIFACT_SCOPES_SQL.format(where=where), params,
                                 what="list the artifacts' scopes")
        return [(r[0], r[1], artifact_scope(r[2])) for r in rows]

    async def store_artifact_seal(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int, digest: bytes, signature: bytes,
    ) -> bool:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._write_job(
            lambda conn: self._artifacts_sql.seal(conn, key, version, digest=digest,
                                                  signature=signature),
            what=f"sign version {version} of artifact {filename!r}", keeps_heads=True)

    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        return await self._read_job(
            lambda conn: self._queries.read_since(conn, session_id, timestamp=timestamp,
                                                  upto=upto, newest=newest, owner=owner),
            what=f"read session {session_id!r}", stale_ok=True, session_id=session_id,
        )

    async def list_sessions_by_update(
        self, *, app_name: str, user_id: str | None
    ) -> list[SessionRecord]:
        sql = f"{SESSION_SQL} WHERE s.app_name = ?"
        params: list[Any] = [app_name]
        if user_id is not None:
            sql += " AND s.user_id = ?"
            params.append(user_id)
        sql += " ORDER BY coalesce(e.timestamp, s.created_at), s.user_id, s.given_id"
        return [session_record(row) for row in await self._fetch(
            sql, params, what="list sessions", stale_ok=True)]

    async def list_sessions_newest(
        self, *, app_name: str | None, user_id: str | None, id_contains: str | None,
        updated_since: float | None, before: tuple[float, str] | None, limit: int,
    ) -> list[SessionRecord]:
        updated = "coalesce(e.timestamp, s.created_at)"
        where = ["1 = 1"]
        params: list[Any] = []
        if app_name is not None:
            where.append("s.app_name = ?")
            params.append(app_name)
        if user_id is not None:
            where.append("s.user_id = ?")
            params.append(user_id)
        if id_contains:
            where.append(self._ID_CONTAINS_SQL)
            params += self._id_contains_params(id_contains)
        if updated_since is not None:
            where.append(f"{updated} >= ?")
            params.append(updated_since)
        if before is not None:
            where.append(f"({updated} < ? OR ({updated} = ? AND s.session_id < ?))")
            params += [before[0], before[0], before[1]]
        sql = (f"{SESSION_SQL} WHERE {' AND '.join(where)} "
               f"ORDER BY {updated} DESC, s.session_id DESC LIMIT ?")
        return [session_record(row) for row in await self._fetch(
            sql, [*params, limit], what="list sessions", stale_ok=True)]

    async def sessions_updated_before(
        self, *, before: float, app_name: str | None, after: tuple[float, str] | None,
        limit: int,
    ) -> list[SessionRecord]:
        return await self._read_job(
            lambda conn: self._retention.updated_before(conn, before, app_name, after, limit),
            what="list sessions by last update")

    async def retention_policies(self) -> list[RetentionPolicy]:
        return await self._read_job(self._retention.policies, what="read the retention policies")

    async def set_retention_policy(self, policy: RetentionPolicy) -> None:
        await self._write_job(lambda conn: self._retention.set_policy(conn, policy),
                              what=f"set the retention policy of app {policy.app_name!r}",
                              keeps_heads=True)

    async def clear_retention_policy(self, app_name: str | None) -> int:
        return await self._write_job(lambda conn: self._retention.clear_policy(conn, app_name),
                                     what="clear retention policies", keeps_heads=True)

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._read_job(lambda conn: self._snapshots.load_many(conn, session_ids),
                                    what="load snapshots")

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        return await self._read_job(lambda conn: self._queries.read_many(conn, after),
                                    what="read sessions")

    async def read_shared_heads(
        self, *, app_name: str, user_ids: Sequence[str | None]
    ) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
        return await self._read_job(
            lambda conn: self._queries.read_shared_heads(conn, app_name, user_ids),
            what=f"read shared state of app {app_name!r}")

    async def load_head_states(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._read_job(
            lambda conn: self._snapshots.load_head_states(conn, session_ids),
            what="load head states")

    async def get_session(self, session_id: str) -> SessionRecord | None:
        rows = await self._fetch(_SESSION_BY_ID, (session_id,),
                                 what=f"read session {session_id!r}", stale_ok=True,
                                 session_id=session_id)
        return session_record(rows[0]) if rows else None

    async def list_sessions(
        self, *, app_name: str | None, user_id: str | None, after: str | None, limit: int
    ) -> list[SessionRecord]:
        where = ["s.session_id > ?"]
        params: list[Any] = [after or ""]
        if app_name is not None:
            where.append("s.app_name = ?")
            params.append(app_name)
        if user_id is not None:
            where.append("s.user_id = ?")
            params.append(user_id)
        params.append(limit)
        sql = f"{SESSION_SQL} WHERE {' AND '.join(where)} ORDER BY s.session_id LIMIT ?"
        return [session_record(row) for row in await self._fetch(
            sql, params, what="list sessions", stale_ok=True)]

    async def scope_mismatches(self, session_id: str) -> list[tuple[int, str, str]]:
        rows = await self._fetch(_SCOPE_SQL, (session_id,),
                                 what=f"read the scope of session {session_id!r}'s events")
        return [(r[0], r[1], r[2]) for r in rows]

    async def has_signed_heads(self) -> bool:
        return bool(await self._fetch(_SIGNED_HEAD_SQL, (),
                                      what="read whether the database is keyed"))

    async def read_scope(
        self, *, app_name: str, user_id: str | None, after: int, upto_position: int | None,
    ) -> list[ScopeEntry]:
        params = (app_name, shared_scope(user_id), after,
                  MAX_POSITION if upto_position is None else upto_position)
        return scope_entries(await self._fetch(
            _STREAM_SQL, params, what=f"read shared state of app {app_name!r}"))

    async def scope_heads(self) -> list[ScopeHead]:
        return scope_heads(await self._fetch(_STREAM_HEADS_SQL, (),
                                             what="read the shared-state streams' heads"))

    async def app_positions(self) -> list[tuple[str, int | None, int]]:
        return [(str(r[0]), None if r[1] is None else int(r[1]), int(r[2]))
                for r in await self._fetch(APP_POSITIONS_SQL, (),
                                           what="read the apps' positions")]

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        rows = await self._fetch(_IMPORTED_SQL, (session_id, after, limit),
                                 what=f"read the imported chain of session {session_id!r}")
        return [ImportedLink(seq=r[0], chain_hash=bytes(r[1]),
                             signature=None if r[2] is None else bytes(r[2]),
                             origin_session_id=r[3]) for r in rows]
