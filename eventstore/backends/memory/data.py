"""What the in-memory backend holds (sessions, artifacts, streams, snapshots, fork links,
retention policies) and the checks every room of it starts with (``_check_open``,
``_session``). The rooms (``base``, ``snapshots``, ``artifacts``, ``memory_index``) mix into
``MemoryData``.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from eventstore._exceptions import SessionNotFoundError, StoreClosedError
from eventstore._fork import ForkLink
from eventstore._retention import RetentionPolicy

from ..protocol import (
    ArtifactRecord,
    HeadState,
    ImportedLink,
    MemoryRow,
    ScopeEntry,
    ScopeHead,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
)

__all__ = ["MemoryData"]


@dataclass
class _Session:
    record: SessionRecord
    events: list[StoredEvent] = field(default_factory=list)
    by_id: dict[str, StoredEvent] = field(default_factory=dict)
    snapshots: dict[int, HeadState] = field(default_factory=dict)
    caches: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    head_state: HeadState | None = None
    imported: list[ImportedLink] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    memory: tuple[int, list[MemoryRow]] | None = None
    """``(upto_seq, rows)`` once the session was added to memory; goes with the session."""


class MemoryData:
    """The in-memory backend's data, shared by its rooms."""

    def __init__(self, *, signing_key: bytes | None = None) -> None:
        self.url = "memory://"
        self.signing_key = signing_key
        """Signs every appended event when set (keyed mode, see ``eventstore._chain``)."""
        self._sessions: dict[str, _Session] = {}
        self._artifacts: dict[tuple[str, str, str | None, str], list[ArtifactRecord]] = {}
        self._positions = itertools.count(1)
        self._shared_snapshots: dict[tuple[str, str | None], dict[int, SharedSnapshot]] = {}
        self._streams: dict[tuple[str, str], list[ScopeEntry]] = {}
        self._stream_heads: dict[tuple[str, str], ScopeHead] = {}
        self._forks: dict[str, ForkLink] = {}
        """Fork session id -> its link (goes with the fork; outlives the origin)."""
        self._given: dict[str, dict[tuple[str, str], str]] = {}
        """Given id -> (app, user) -> the key of that session (``find_sessions``)."""
        self._retention: dict[str, RetentionPolicy] = {}
        """App name -> its retention policy."""
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    def _session(self, session_id: str, owner: tuple[str, str] | None = None) -> _Session:
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None or (owner is not None and (
                session.record.app_name, session.record.user_id) != owner):
            raise SessionNotFoundError(session_id)
        return session
