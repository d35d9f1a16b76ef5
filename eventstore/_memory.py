"""The in-memory backend: the same contract as the SQL backends, for tests and prototypes.

Nothing survives the process. Operations are atomic because each runs without awaiting between
its check and its write (one event loop, no threads).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._backend import (
    ArtifactRecord,
    EventRow,
    ImportedLink,
    MemoryRow,
    NewArtifact,
    NewEvent,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
    check_artifact_version,
    check_batch_ids,
    check_retry,
    written,
)
from ._chain import GENESIS, content_digest, link, sign_event, sign_head
from ._exceptions import (
    ConcurrencyError,
    CorruptEventError,
    SessionExistsError,
    SessionNotFoundError,
    StoreClosedError,
)
from ._fork import ForkLink, ForkPlan
from ._memorytext import words

__all__ = ["MemoryBackend"]


@dataclass
class _Session:
    record: SessionRecord
    events: list[StoredEvent] = field(default_factory=list)
    by_id: dict[str, StoredEvent] = field(default_factory=dict)
    snapshots: dict[int, bytes] = field(default_factory=dict)
    caches: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    imported: list[ImportedLink] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    memory: tuple[int, list[MemoryRow]] | None = None
    """``(upto_seq, rows)`` once the session was added to memory; goes with the session."""


class MemoryBackend:
    """A backend that keeps everything in process memory, with the SQL backends' semantics."""

    def __init__(self, *, signing_key: bytes | None = None) -> None:
        self.url = "memory://"
        self.signing_key = signing_key
        """Signs every appended event when set (keyed mode, see ``eventstore._chain``)."""
        self._sessions: dict[str, _Session] = {}
        self._artifacts: dict[tuple[str, str, str | None, str], list[ArtifactRecord]] = {}
        self._positions = itertools.count(1)
        self._shared_snapshots: dict[tuple[str, str | None], dict[int, SharedSnapshot]] = {}
        self._forks: dict[str, ForkLink] = {}
        """Fork session id -> its link (goes with the fork; outlives the origin)."""
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    def _session(self, session_id: str) -> _Session:
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    def _summary(self, session: _Session) -> SessionRecord:
        record = session.record
        if not session.events:
            return SessionRecord(
                session_id=record.session_id,
                app_name=record.app_name,
                user_id=record.user_id,
                created_at=record.created_at,
                version=0,
                updated_at=record.created_at,
                head_seq=0,
            )
        last = session.events[-1]
        return SessionRecord(
            session_id=record.session_id,
            app_name=record.app_name,
            user_id=record.user_id,
            created_at=record.created_at,
            version=last.seq,
            updated_at=last.timestamp,
            head_seq=last.seq,
            head_hash=last.chain_hash,
            head_signature=None if self.signing_key is None or last.chain_hash is None
            else sign_head(self.signing_key, record.session_id, last.seq, last.chain_hash),
        )

    async def create_session(
        self,
        record: SessionRecord,
        initial: Sequence[NewEvent],
        artifacts: Sequence[NewArtifact] = (),
        imported: Sequence[ImportedLink] = (),
    ) -> None:
        """See ``Backend.create_session``."""
        self._check_open()
        sid = record.session_id
        if sid in self._sessions:
            raise SessionExistsError(sid)
        check_batch_ids(sid, initial)
        # Every check before the first write: nothing awaits in between, so this is atomic.
        planned: dict[tuple[str, str, str | None, str], int] = {}
        for artifact in artifacts:
            key = (record.app_name, record.user_id,
                   sid if artifact.session_scoped else None, artifact.filename)
            version = planned.get(key, len(self._artifacts.get(key, ())))
            check_artifact_version(sid, artifact, version)
            planned[key] = version + 1
        session = _Session(record=record, imported=sorted(imported, key=lambda i: i.seq))
        self._sessions[sid] = session
        self._write(session, initial, start=1)
        for artifact in artifacts:
            key = (record.app_name, record.user_id,
                   sid if artifact.session_scoped else None, artifact.filename)
            self._artifacts.setdefault(key, []).append(ArtifactRecord(
                filename=artifact.filename, version=artifact.version,
                mime_type=artifact.mime_type, data=artifact.data,
                created_at=artifact.created_at))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """See ``Backend.get_session``."""
        self._check_open()
        session = self._sessions.get(session_id)
        return None if session is None else self._summary(session)

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> None:
        """See ``Backend.fork_session``."""
        self._check_open()
        sid, origin_id = record.session_id, plan.origin_session_id
        origin = self._sessions.get(origin_id)
        if origin is None or len(origin.events) < plan.seq:
            raise SessionNotFoundError(origin_id)
        if sid in self._sessions:
            raise SessionExistsError(sid)
        # Every check before the first write: nothing awaits in between, so this is atomic.
        fork = _Session(record=record)
        for event in origin.events[:plan.seq]:
            copy = dataclasses.replace(
                event, session_id=sid, shared_state=False,
                signature=None if self.signing_key is None or event.chain_hash is None
                else sign_event(self.signing_key, sid, event.chain_hash))
            fork.events.append(copy)
            fork.by_id[copy.event_id] = copy
        fork.snapshots = {s: v for s, v in origin.snapshots.items() if s <= plan.seq}
        self._sessions[sid] = fork
        app, user = record.app_name, record.user_id
        for filename, newest in plan.artifacts.items():
            versions = [r for r in self._artifacts.get((app, user, origin_id, filename), ())
                        if r.version <= newest]
            if versions:
                self._artifacts[(app, user, sid, filename)] = versions
        self._forks[sid] = ForkLink(session_id=sid, origin_session_id=origin_id,
                                    origin_seq=plan.seq, forked_at=plan.forked_at)

    async def fork_links(self, session_id: str) -> list[ForkLink]:
        """See ``Backend.fork_links``."""
        self._check_open()
        return sorted(
            (link for link in self._forks.values()
             if session_id in (link.session_id, link.origin_session_id)),
            key=lambda link: (link.forked_at, link.session_id),
        )

    async def scope_mismatches(self, session_id: str) -> list[tuple[int, str, str]]:
        """See ``Backend.scope_mismatches`` (events carry no scope of their own here)."""
        self._session(session_id)
        return []

    async def has_signed_heads(self) -> bool:
        """See ``Backend.has_signed_heads`` (a memory store is keyed or not from its start)."""
        self._check_open()
        return self.signing_key is not None and any(s.events for s in self._sessions.values())

    async def list_sessions(
        self, *, app_name: str | None, user_id: str | None, after: str | None, limit: int
    ) -> list[SessionRecord]:
        """See ``Backend.list_sessions``."""
        self._check_open()
        ids = sorted(
            sid
            for sid, s in self._sessions.items()
            if (app_name is None or s.record.app_name == app_name)
            and (user_id is None or s.record.user_id == user_id)
            and (after is None or sid > after)
        )
        return [self._summary(self._sessions[sid]) for sid in ids[:limit]]

    async def delete_session(self, session_id: str) -> bool:
        """See ``Backend.delete_session``."""
        self._check_open()
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._forks.pop(session_id, None)
        record = session.record
        for scope in [k for k in self._shared_snapshots if k[0] == record.app_name]:
            del self._shared_snapshots[scope]
        for key in [k for k in self._artifacts if k[:3] == (record.app_name, record.user_id,
                                                             session_id)]:
            del self._artifacts[key]
        session.changed.set()
        return True

    def _write(self, session: _Session, events: Sequence[NewEvent], *, start: int) -> list[
        StoredEvent
    ]:
        stored_batch = []
        sid = session.record.session_id
        chain = session.events[-1].chain_hash if session.events else None
        for offset, event in enumerate(events):
            seq = start + offset
            chain = link(chain or GENESIS, seq, content_digest(event))
            stored = written(
                sid, event, seq=seq, position=next(self._positions), chain_hash=chain,
                signature=None if self.signing_key is None else sign_event(
                    self.signing_key, sid, chain),
            )
            session.events.append(stored)
            session.by_id[stored.event_id] = stored
            stored_batch.append(stored)
        if stored_batch:
            session.changed.set()
            session.changed = asyncio.Event()
        return stored_batch

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None
    ) -> list[StoredEvent]:
        """See ``Backend.append``."""
        session = self._session(session_id)
        check_batch_ids(session_id, events)
        retried = check_retry(session_id, events, session.by_id)
        if retried is not None:
            return retried
        actual = len(session.events)
        if expected_version is not None and expected_version != actual:
            raise ConcurrencyError(
                session_id, expected_version=expected_version, actual_version=actual
            )
        return self._write(session, events, start=actual + 1)

    async def read(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
    ) -> list[StoredEvent]:
        """See ``Backend.read``."""
        events = self._session(session_id).events
        low = max(after or 0, 0)  # a negative slice start would count from the end
        high = len(events) if upto is None else min(upto, len(events))
        chosen = events[low:high] if high > low else []
        if backwards:
            chosen = chosen[::-1]
        return chosen if limit is None else chosen[:limit]

    async def read_rows(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
    ) -> list[EventRow]:
        """See ``Backend.read_rows``."""
        chosen = await self.read(session_id, after=after, upto=upto, backwards=backwards,
                                 limit=limit)
        out: list[EventRow] = []
        for e in chosen:
            if e.damage is not None:
                raise CorruptEventError(session_id, e.seq, e.damage + ".")
            out.append((e.seq, e.event_id, e.invocation_id, e.author, e.timestamp,
                        e.schema_version, e.payload))
        return out

    async def read_shared(
        self,
        *,
        app_name: str,
        user_id: str | None,
        upto_position: int | None,
        after_position: int | None = None,
    ) -> list[StoredEvent]:
        """See ``Backend.read_shared``."""
        self._check_open()
        low = after_position or 0
        found = [
            e
            for s in self._sessions.values()
            if s.record.app_name == app_name and (user_id is None or s.record.user_id == user_id)
            for e in s.events
            if e.shared_state and e.position > low
            and (upto_position is None or e.position <= upto_position)
        ]
        return sorted(found, key=lambda e: e.position)

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        """See ``Backend.load_shared_snapshot``."""
        self._check_open()
        snapshots = self._shared_snapshots.get((app_name, user_id), {})
        positions = [p for p in snapshots if upto_position is None or p <= upto_position]
        return snapshots[max(positions)] if positions else None

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        """See ``Backend.save_shared_snapshot``."""
        self._check_open()
        covered = await self.read_shared(
            app_name=app_name, user_id=user_id, upto_position=snapshot.position
        )
        if len(covered) == snapshot.count:
            self._shared_snapshots.setdefault((app_name, user_id), {})[snapshot.position] = (
                snapshot
            )

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> tuple[int, bytes] | None:
        """See ``Backend.load_snapshot``."""
        snapshots = self._session(session_id).snapshots
        seqs = [s for s in snapshots if upto is None or s <= upto]
        if not seqs:
            return None
        best = max(seqs)
        return best, snapshots[best]

    async def save_snapshot(self, session_id: str, seq: int, state: bytes) -> None:
        """See ``Backend.save_snapshot``."""
        self._session(session_id).snapshots[seq] = state

    async def drop_snapshots(self) -> int:
        """See ``Backend.drop_snapshots``."""
        self._check_open()
        dropped = sum(len(s) for s in self._shared_snapshots.values())
        self._shared_snapshots.clear()
        for session in self._sessions.values():
            dropped += len(session.snapshots) + len(session.caches)
            session.snapshots.clear()
            session.caches.clear()
        return dropped

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        """See ``Backend.read_imported``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            return []
        return [link for link in session.imported if link.seq > after][:limit]

    async def load_cache(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        """See ``Backend.load_cache``."""
        self._check_open()
        session = self._sessions.get(session_id)
        return None if session is None else session.caches.get(name)

    async def save_cache(self, session_id: str, name: str, seq: int, data: bytes) -> None:
        """See ``Backend.save_cache``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is not None:
            session.caches[name] = (seq, bytes(data))

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
        """See ``Backend.save_artifact``."""
        self._check_open()
        versions = self._artifacts.setdefault((app_name, user_id, session_id, filename), [])
        record = ArtifactRecord(
            filename=filename,
            version=versions[-1].version + 1 if versions else 0,
            mime_type=mime_type,
            data=bytes(data),
            created_at=created_at,
            metadata=metadata,
        )
        versions.append(record)
        return record.version

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        """See ``Backend.load_artifact``."""
        self._check_open()
        versions = self._artifacts.get((app_name, user_id, session_id, filename), [])
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return next((r for r in versions if r.version == version), None)

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        """See ``Backend.list_artifacts``."""
        self._check_open()
        return {
            key[3]: [r.version for r in records]
            for key, records in sorted(self._artifacts.items(), key=lambda kv: kv[0][3])
            if key[:3] == (app_name, user_id, session_id) and records
        }

    # -- memory --------------------------------------------------------------------------------

    async def index_memory(
        self, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
        rows: Sequence[MemoryRow], added_at: float,
    ) -> bool:
        """See ``Backend.index_memory``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            return False
        session.memory = (upto_seq, list(rows))
        return True

    async def search_memory(
        self, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
    ) -> list[MemoryRow]:
        """See ``Backend.search_memory``: ranked by how many terms a row matches, newest first."""
        self._check_open()
        wanted = set(terms)
        scored: list[tuple[int, float, MemoryRow]] = []
        for session in self._sessions.values():
            record = session.record
            if session.memory is None or (record.app_name, record.user_id) != (app_name, user_id):
                continue
            for row in session.memory[1]:
                found = words(row.text)
                hits = sum(any(w.startswith(term) for w in found) for term in wanted)
                if hits:
                    scored.append((hits, row.timestamp, row))
        scored.sort(key=lambda item: (-item[0], -item[1], item[2].session_id, item[2].seq))
        return [row for _, _, row in scored[:limit]]

    async def remembered_sessions(self) -> list[tuple[str, str, str, int]]:
        """See ``Backend.remembered_sessions``."""
        self._check_open()
        return [
            (sid, s.record.app_name, s.record.user_id, s.memory[0])
            for sid, s in sorted(self._sessions.items())
            if s.memory is not None
        ]

    async def memory_rows(self, session_id: str) -> list[MemoryRow]:
        """See ``Backend.memory_rows``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None or session.memory is None:
            return []
        return list(session.memory[1])

    async def clear_memory_rows(self) -> int:
        """See ``Backend.clear_memory_rows``."""
        self._check_open()
        cleared = 0
        for session in self._sessions.values():
            if session.memory is not None:
                cleared += len(session.memory[1])
                session.memory = (session.memory[0], [])
        return cleared
    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        """See ``Backend.list_artifact_versions``."""
        self._check_open()
        versions = self._artifacts.get((app_name, user_id, session_id, filename), [])
        return [dataclasses.replace(r, data=b"") for r in versions]

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        """See ``Backend.delete_artifact``."""
        self._check_open()
        return len(self._artifacts.pop((app_name, user_id, session_id, filename), []))

    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None
    ) -> list[StoredEvent]:
        """See ``Backend.read_since``."""
        events = self._session(session_id).events
        high = len(events) if upto is None else min(max(upto, 0), len(events))
        chosen = [e for e in events[:high] if e.timestamp >= timestamp]
        if newest is not None:
            chosen = chosen[max(len(chosen) - newest, 0):] if newest else []
        return chosen

    async def list_sessions_by_update(
        self, *, app_name: str, user_id: str | None
    ) -> list[SessionRecord]:
        """See ``Backend.list_sessions_by_update``."""
        self._check_open()
        found = [
            self._summary(s) for s in self._sessions.values()
            if s.record.app_name == app_name and (user_id is None or s.record.user_id == user_id)
        ]
        return sorted(found, key=lambda r: (r.updated_at, r.user_id, r.session_id))

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """See ``Backend.load_snapshots``."""
        self._check_open()
        found: dict[str, tuple[int, bytes]] = {}
        for sid in session_ids:
            session = self._sessions.get(sid)
            if session is not None and session.snapshots:
                best = max(session.snapshots)
                found[sid] = (best, session.snapshots[best])
        return found

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        """See ``Backend.read_many``."""
        self._check_open()
        found: dict[str, list[StoredEvent]] = {}
        for sid, low in after.items():
            session = self._sessions.get(sid)
            found[sid] = [] if session is None else session.events[max(low, 0):]
        return found

    async def wait_for_events(self, session_id: str, *, after: int, max_wait: float) -> None:
        """See ``Backend.wait_for_events``."""
        session = self._session(session_id)
        if len(session.events) > after:
            return
        try:
            async with asyncio.timeout(max_wait):  # not wait_for: see Wakeups.wait
                await session.changed.wait()
        except TimeoutError:
            return

    async def aclose(self) -> None:
        """See ``Backend.aclose``."""
        self._closed = True
