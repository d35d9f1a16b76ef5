"""The in-memory backend's base: ``MemoryBackend`` with its sessions, appends, reads, forks
and retention; its caches, artifacts and memory index are the rooms it mixes in.

Nothing survives the process. Operations are atomic because each runs without awaiting between
its check and its write (one event loop, no threads).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence

from eventstore._chain import GENESIS, content_digest, link, sign_event, sign_head
from eventstore._exceptions import (
    ConcurrencyError,
    CorruptEventError,
    SessionExistsError,
    SessionNotFoundError,
)
from eventstore._fork import ForkLink, ForkPlan
from eventstore._retention import RetentionPolicy
from eventstore._scopes import APP_SCOPE, ScopeWriter

from ..protocol import (
    EventRow,
    ImportedLink,
    ImportSource,
    NewArtifact,
    NewEvent,
    ScopeEntry,
    ScopeHead,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
    check_artifact_version,
    check_batch_ids,
    check_retry,
    fresh_key,
    seal_fork_link,
    written,
)
from .artifacts import ArtifactMethods
from .data import _Session
from .memory_index import MemoryIndexMethods
from .snapshots import SnapshotMethods

__all__ = ["MemoryBackend"]


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
"""Folds ASCII letters only, as SQLite's lower() does: the id filter's rule on every backend."""


class MemoryBackend(ArtifactMethods, SnapshotMethods, MemoryIndexMethods):
    """A backend that keeps everything in process memory, with the SQL backends' semantics."""

    def _summary(self, session: _Session) -> SessionRecord:
        record = session.record
        if not session.events:
            return SessionRecord(
                session_id=record.session_id,
                given_id=record.given_id,
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
            given_id=record.given_id,
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

    async def import_session(self, record: SessionRecord, source: ImportSource) -> str:
        """See ``Backend.import_session``: the log is in memory anyway, so the pages are
        gathered and stored by one ``create_session``."""
        self._check_open()
        events: list[NewEvent] = []
        links: list[ImportedLink] = []
        artifacts: list[NewArtifact] = []
        copy_of: ForkLink | None = None
        while (page := await asyncio.to_thread(source)) is not None:
            events += page.events
            links += page.imported
            artifacts += page.artifacts
            copy_of = page.copy_of or copy_of
        sid = await self.create_session(record, events, artifacts, links)
        if copy_of is not None:  # nothing awaited since the session was made: atomic
            self._forks[sid] = self._sealed(dataclasses.replace(copy_of, session_id=sid))
        return sid

    async def create_session(
        self,
        record: SessionRecord,
        initial: Sequence[NewEvent],
        artifacts: Sequence[NewArtifact] = (),
        imported: Sequence[ImportedLink] = (),
    ) -> str:
        """See ``Backend.create_session``."""
        self._check_open()
        record, sid = self._claim(record)
        check_batch_ids(sid, initial)
        # Every check before the first write: nothing awaits in between, so this is atomic.
        planned: dict[tuple[str, str, str | None, str], int] = {}
        for artifact in artifacts:
            key = (record.app_name, record.user_id,
                   record.given_id if artifact.session_scoped else None, artifact.filename)
            version = planned.get(key, len(self._artifacts.get(key, ())))
            check_artifact_version(sid, artifact, version)
            planned[key] = version + 1
        session = _Session(record=record, imported=sorted(imported, key=lambda i: i.seq))
        self._add(session)
        self._write(session, initial, start=1)
        for artifact in artifacts:
            key = (record.app_name, record.user_id,
                   record.given_id if artifact.session_scoped else None, artifact.filename)
            self._artifacts.setdefault(key, []).append(self._artifact(
                filename=artifact.filename, version=artifact.version,
                mime_type=artifact.mime_type, data=artifact.data,
                created_at=artifact.created_at, metadata=None))
        return sid

    def _claim(self, record: SessionRecord) -> tuple[SessionRecord, str]:
        """The record of a new session under the key it gets (``Backend.create_session``);
        SessionExistsError when its app's user has a session with its id."""
        given = record.id
        if (record.app_name, record.user_id) in self._given.get(given, {}):
            raise SessionExistsError(given)
        sid = record.session_id if record.session_id not in self._sessions else fresh_key()
        return dataclasses.replace(record, session_id=sid, given_id=given), sid

    def _add(self, session: _Session) -> None:
        record = session.record
        self._sessions[record.session_id] = session
        self._given.setdefault(record.given_id, {})[(record.app_name, record.user_id)] = (
            record.session_id)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """See ``Backend.get_session``."""
        self._check_open()
        session = self._sessions.get(session_id)
        return None if session is None else self._summary(session)

    async def find_sessions(
        self, given_id: str, *, app_name: str | None, user_id: str | None
    ) -> list[SessionRecord]:
        """See ``Backend.find_sessions``."""
        self._check_open()
        return [
            self._summary(self._sessions[key])
            for (app, user), key in sorted(self._given.get(given_id, {}).items())
            if (app_name is None or app == app_name) and (user_id is None or user == user_id)
        ]

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> str:
        """See ``Backend.fork_session``."""
        self._check_open()
        origin_id = plan.origin_session_id
        origin = self._sessions.get(origin_id)
        if origin is None or len(origin.events) < plan.seq:
            raise SessionNotFoundError(origin_id)
        record, sid = self._claim(record)
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
        self._add(fork)
        app, user = record.app_name, record.user_id
        for filename, newest in plan.artifacts.items():
            versions = [r for r in self._artifacts.get(
                (app, user, origin.record.given_id, filename), ()) if r.version <= newest]
            if versions:
                self._artifacts[(app, user, record.given_id, filename)] = versions
        self._forks[sid] = self._sealed(ForkLink(session_id=sid, origin_session_id=origin_id,
                                                 origin_seq=plan.seq, forked_at=plan.forked_at))
        return sid

    def _sealed(self, link: ForkLink) -> ForkLink:
        link_hash, signature = seal_fork_link(self.signing_key, link)
        return dataclasses.replace(link, link_hash=link_hash, signature=signature)

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

    async def delete_session(self, session_id: str, *, expected_version: int | None = None
                             ) -> bool:
        """See ``Backend.delete_session``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            return False
        version = self._summary(session).version
        if expected_version is not None and version != expected_version:
            raise ConcurrencyError(session_id, expected_version=expected_version,
                                   actual_version=version, refused="nothing was deleted")
        del self._sessions[session_id]
        self._forks.pop(session_id, None)
        record = session.record
        owners = self._given[record.given_id]
        del owners[(record.app_name, record.user_id)]
        if not owners:
            del self._given[record.given_id]
        for key in [k for k in self._artifacts if k[:3] == (record.app_name, record.user_id,
                                                             record.given_id)]:
            del self._artifacts[key]
        session.changed.set()
        return True

    def _write(self, session: _Session, events: Sequence[NewEvent], *, start: int) -> list[
        StoredEvent
    ]:
        stored_batch = []
        record = session.record
        sid = record.session_id
        chain = session.events[-1].chain_hash if session.events else None
        scopes = ScopeWriter(self._stream_head, self.signing_key)
        for offset, event in enumerate(events):
            seq = start + offset
            chain = link(chain or GENESIS, seq, content_digest(event))
            stored = written(
                sid, event, seq=seq, position=next(self._positions), chain_hash=chain,
                signature=None if self.signing_key is None else sign_event(
                    self.signing_key, sid, chain),
            )
            if event.shared_state:
                scopes.add(record.app_name, record.user_id, session_id=sid, seq=seq,
                           event_id=event.event_id, position=stored.position,
                           app_delta=event.app_delta, user_delta=event.user_delta)
            session.events.append(stored)
            session.by_id[stored.event_id] = stored
            stored_batch.append(stored)
        for entry in scopes.entries:
            self._streams.setdefault((entry.app_name, entry.user_id), []).append(entry)
        for head in scopes.heads():
            self._stream_heads[(head.app_name, head.user_id)] = head
        if stored_batch:
            session.changed.set()
            session.changed = asyncio.Event()
        return stored_batch

    def _stream_head(self, app_name: str, user_id: str) -> tuple[int, bytes | None]:
        head = self._stream_heads.get((app_name, user_id))
        return (0, None) if head is None else (head.head_seq, head.head_hash)

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """See ``Backend.append``."""
        session = self._session(session_id, owner)
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
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """See ``Backend.read``."""
        events = self._session(session_id, owner).events
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
        owner: tuple[str, str] | None = None,
    ) -> list[EventRow]:
        """See ``Backend.read_rows``."""
        chosen = await self.read(session_id, after=after, upto=upto, backwards=backwards,
                                 limit=limit, owner=owner)
        out: list[EventRow] = []
        for e in chosen:
            if e.damage is not None:
                raise CorruptEventError(session_id, e.seq, e.damage + ".")
            out.append((e.seq, e.event_id, e.invocation_id, e.author, e.timestamp,
                        e.schema_version, e.payload))
        return out

    async def read_scope(
        self, *, app_name: str, user_id: str | None, after: int, upto_position: int | None,
    ) -> list[ScopeEntry]:
        """See ``Backend.read_scope``."""
        self._check_open()
        stream = self._streams.get((app_name, APP_SCOPE if user_id is None else user_id), [])
        return [e for e in stream[max(after, 0):]
                if upto_position is None or e.position <= upto_position]

    async def app_positions(self) -> list[tuple[str, int | None, int]]:
        """See ``Backend.app_positions``: one counter for every app here, which nothing
        outside the store can move, so each app's counter is its highest position."""
        self._check_open()
        highest: dict[str, int] = {}
        for session in self._sessions.values():
            for event in session.events:
                if event.shared_state:
                    app = session.record.app_name
                    highest[app] = max(highest.get(app, 0), event.position)
        for (app, _user), stream in self._streams.items():
            for entry in stream:
                highest[app] = max(highest.get(app, 0), entry.position)
        return [(app, top, top) for app, top in sorted(highest.items())]

    async def scope_heads(self) -> list[ScopeHead]:
        """See ``Backend.scope_heads``."""
        self._check_open()
        return [self._stream_heads[k] for k in sorted(self._stream_heads)]

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        """See ``Backend.read_imported``."""
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            return []
        return [link for link in session.imported if link.seq > after][:limit]


    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """See ``Backend.read_since``."""
        events = self._session(session_id, owner).events
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
        return sorted(found, key=lambda r: (r.updated_at, r.user_id, r.given_id))

    async def list_sessions_newest(
        self, *, app_name: str | None, user_id: str | None, id_contains: str | None,
        updated_since: float | None, before: tuple[float, str] | None, limit: int,
    ) -> list[SessionRecord]:
        """See ``Backend.list_sessions_newest``."""
        self._check_open()
        needle = (id_contains or "").translate(_ASCII_LOWER)
        found: list[SessionRecord] = []
        for session in self._sessions.values():
            record = session.record
            if (app_name is not None and record.app_name != app_name) or (
                user_id is not None and record.user_id != user_id
            ) or needle not in record.id.translate(_ASCII_LOWER):
                continue
            summary = self._summary(session)
            if updated_since is not None and summary.updated_at < updated_since:
                continue
            if before is not None and (summary.updated_at, summary.session_id) >= before:
                continue
            found.append(summary)
        return sorted(found, key=lambda r: (r.updated_at, r.session_id), reverse=True)[:limit]

    async def sessions_updated_before(
        self, *, before: float, app_name: str | None, after: tuple[float, str] | None,
        limit: int,
    ) -> list[SessionRecord]:
        """See ``Backend.sessions_updated_before``."""
        self._check_open()
        found = [
            record for record in map(self._summary, self._sessions.values())
            if record.updated_at < before
            and (app_name is None or record.app_name == app_name)
            and (after is None or (record.updated_at, record.session_id) > after)
        ]
        found.sort(key=lambda r: (r.updated_at, r.session_id))
        return found[:limit]

    async def retention_policies(self) -> list[RetentionPolicy]:
        """See ``Backend.retention_policies``."""
        self._check_open()
        return [self._retention[name] for name in sorted(self._retention)]

    async def set_retention_policy(self, policy: RetentionPolicy) -> None:
        """See ``Backend.set_retention_policy``."""
        self._check_open()
        self._retention[policy.app_name] = policy

    async def clear_retention_policy(self, app_name: str | None) -> int:
        """See ``Backend.clear_retention_policy``."""
        self._check_open()
        if app_name is None:
            count = len(self._retention)
            self._retention.clear()
            return count
        return 0 if self._retention.pop(app_name, None) is None else 1

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        """See ``Backend.read_many``."""
        self._check_open()
        found: dict[str, list[StoredEvent]] = {}
        for sid, low in after.items():
            session = self._sessions.get(sid)
            found[sid] = [] if session is None else session.events[max(low, 0):]
        return found

    async def read_shared_heads(
        self, *, app_name: str, user_ids: Sequence[str | None]
    ) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
        """See ``Backend.read_shared_heads``."""
        found: dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]] = {}
        for user_id in dict.fromkeys(user_ids):
            snapshot = await self.load_shared_snapshot(app_name=app_name, user_id=user_id,
                                                       upto_position=None)
            found[user_id] = (snapshot, await self.read_scope(
                app_name=app_name, user_id=user_id,
                after=0 if snapshot is None else snapshot.count, upto_position=None))
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
