"""The in-memory backend's memory index: the rows ``eventstore.recall`` searches, kept with
their session (deleted with it)."""

from __future__ import annotations

from collections.abc import Sequence

from eventstore.recall.text import words

from ..protocol import MemoryRow
from .data import MemoryData

__all__ = ["MemoryIndexMethods"]


class MemoryIndexMethods(MemoryData):
    """Mixed into MemoryBackend: indexing and searching memory rows."""

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
