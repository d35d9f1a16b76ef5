"""The in-memory backend's caches: state snapshots (of sessions and of ``user:``/``app:``
streams), head states and session caches, each served only while the event or stream entry it
is bound to still holds its chain hash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eventstore._scopes import APP_SCOPE

from ..protocol import HeadState, SharedSnapshot
from .data import MemoryData, _Session

__all__ = ["SnapshotMethods"]


class SnapshotMethods(MemoryData):
    """Mixed into MemoryBackend: snapshots, head states and session caches."""

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        """See ``Backend.load_shared_snapshot``."""
        self._check_open()
        snapshots = self._shared_snapshots.get((app_name, user_id), {})
        stream = self._streams.get((app_name, APP_SCOPE if user_id is None else user_id), [])

        def bound(snapshot: SharedSnapshot) -> bool:  # its entry still holds its hash
            if not 0 < snapshot.count <= len(stream):
                return False
            entry = stream[snapshot.count - 1]
            return (entry.position == snapshot.position and snapshot.chain_hash is not None
                    and entry.chain_hash == snapshot.chain_hash)

        positions = [p for p, snapshot in snapshots.items()
                     if (upto_position is None or p <= upto_position) and bound(snapshot)]
        return snapshots[max(positions)] if positions else None

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        """See ``Backend.save_shared_snapshot``."""
        self._check_open()
        self._shared_snapshots.setdefault((app_name, user_id), {})[snapshot.position] = snapshot

    @staticmethod
    def _bound(session: _Session, snapshot: HeadState) -> bool:
        """Whether the session's event at the snapshot's seq still has its chain hash."""
        return (0 < snapshot.seq <= len(session.events)
                and session.events[snapshot.seq - 1].chain_hash == snapshot.chain_hash)

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> HeadState | None:
        """See ``Backend.load_snapshot``."""
        session = self._session(session_id)
        seqs = [s for s, snapshot in session.snapshots.items()
                if (upto is None or s <= upto) and self._bound(session, snapshot)]
        return session.snapshots[max(seqs)] if seqs else None

    async def save_snapshot(self, session_id: str, snapshot: HeadState) -> None:
        """See ``Backend.save_snapshot``."""
        self._session(session_id).snapshots[snapshot.seq] = snapshot

    async def drop_snapshots(self) -> int:
        """See ``Backend.drop_snapshots``."""
        self._check_open()
        dropped = sum(len(s) for s in self._shared_snapshots.values())
        self._shared_snapshots.clear()
        for session in self._sessions.values():
            dropped += (len(session.snapshots) + len(session.caches)
                        + (session.head_state is not None))
            session.snapshots.clear()
            session.caches.clear()
            session.head_state = None
        return dropped

    async def load_cache(
        self, session_id: str, name: str, *, owner: tuple[str, str] | None = None
    ) -> tuple[int, bytes] | None:
        """See ``Backend.load_cache``."""
        if owner is not None:
            return self._session(session_id, owner).caches.get(name)
        self._check_open()
        session = self._sessions.get(session_id)
        return None if session is None else session.caches.get(name)

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        owner: tuple[str, str] | None = None,
    ) -> None:
        """See ``Backend.save_cache``."""
        self._check_open()
        session = (self._session(session_id, owner) if owner is not None
                   else self._sessions.get(session_id))
        if session is not None:
            session.caches[name] = (seq, bytes(data))

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        """See ``Backend.load_snapshots``."""
        self._check_open()
        found: dict[str, HeadState] = {}
        for sid in session_ids:
            session = self._sessions.get(sid)
            seqs = [] if session is None else [
                s for s, snapshot in session.snapshots.items() if self._bound(session, snapshot)]
            if session is not None and seqs:
                found[sid] = session.snapshots[max(seqs)]
        return found

    def _current_head_state(self, session_id: str, state: HeadState | None) -> bool:
        session = self._sessions.get(session_id)
        return (session is not None and state is not None
                and 0 < state.seq <= len(session.events)
                and session.events[state.seq - 1].chain_hash == state.chain_hash)

    async def load_head_states(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        """See ``Backend.load_head_states``."""
        self._check_open()
        found: dict[str, HeadState] = {}
        for sid in session_ids:
            session = self._sessions.get(sid)
            if session is not None and session.head_state is not None \
                    and self._current_head_state(sid, session.head_state):
                found[sid] = session.head_state
        return found

    async def save_head_states(self, states: Mapping[str, HeadState]) -> None:
        """See ``Backend.save_head_states``."""
        self._check_open()
        for sid, state in states.items():
            session = self._sessions.get(sid)
            if session is None or not self._current_head_state(sid, state):
                continue
            session.head_state = state
