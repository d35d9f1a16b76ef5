"""How a SQL backend runs work, said once for both (the lower half of the shared base).

``SQLJobs`` finds a backend's rooms (``reads``, ``snapshots``, ``artifacts``,
``memory_index``, ``retention``, ``fork``: the same room names in both packages) and declares
the hooks each backend implements in its own way: a job run as a read or a write
(``_read_job``, ``_write_job``: a sqlite3 function on a driver thread, an asyncpg coroutine on
a pooled connection), one statement's rows, a range read of a session's events and a cache
write. ``numbered`` converts the shared statements' ``?`` placeholders for a driver with
numbered ones. ``base.SQLBackendBase`` builds the protocol's methods on top.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from ..protocol import ImportedLink, NewArtifact, NewEvent, SessionRecord, StoredEvent
from .rows import seq_bound

__all__ = ["R", "RangeRead", "SQLJobs", "T", "numbered"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RangeRead:
    """One range read of a session's events, as a backend's ``_range_job`` reads it."""

    session_id: str
    """The session read."""
    plain: bool
    """Plain rows (``EventRow``) rather than envelopes (``StoredEvent``)."""
    backwards: bool
    """Newest first."""
    low: int
    """Rows with ``seq`` above this (``seq_bound`` of ``after``)."""
    high: int
    """Rows with ``seq`` up to this (``seq_bound`` of ``upto``)."""
    limit: int | None
    """How many rows at most (None: all)."""
    owner: tuple[str, str] | None
    """``(app, user)`` the session must belong to, when given."""


@functools.lru_cache(maxsize=64)
def numbered(sql: str) -> str:
    """``sql`` with its ``?`` placeholders numbered ``$1``, ``$2``, … (asyncpg's style). The
    statements given hold no ``?`` but placeholders."""
    count = 0

    def number(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"${count}"

    return re.sub(r"\?", number, sql)

_ROOMS = {
    "_artifacts_sql": "artifacts",
    "_forks": "fork",
    "_memory": "memory_index",
    "_queries": "reads",
    "_retention": "retention",
    "_snapshots": "snapshots",
}
"""Attribute -> the room of the backend's package it names (``__init_subclass__``)."""

R = TypeVar("R")
T = TypeVar("T")


class SQLJobs(ABC):
    """How a SQL backend runs work: the rooms it names and the hooks it implements (a job run
    as a read or a write, one statement's rows, a range read, a cache write), with the reads
    built on them (``_fetch``, ``_read_range``). ``SQLBackendBase`` builds the protocol's
    methods on these."""

    signing_key: bytes | None
    """See ``Backend.signing_key``."""

    _artifacts_sql: ModuleType
    """The backend's ``artifacts`` room."""
    _forks: ModuleType
    """The backend's ``fork`` room."""
    _memory: ModuleType
    """The backend's ``memory_index`` room."""
    _queries: ModuleType
    """The backend's ``reads`` room (the cold-path reads)."""
    _retention: ModuleType
    """The backend's ``retention`` room."""
    _snapshots: ModuleType
    """The backend's ``snapshots`` room."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Find the backend's rooms by their names in its package: both packages have the
        same rooms for the same jobs, and a backend missing one fails when it is defined."""
        super().__init_subclass__(**kwargs)
        package = cls.__module__.rpartition(".")[0]
        if package == __package__:
            return  # the shared base itself, not a backend
        for attribute, room in _ROOMS.items():
            setattr(cls, attribute, importlib.import_module(f"{package}.{room}"))

    _ID_CONTAINS_SQL: str
    """The condition that the session's given id contains a text, folding ASCII letters only
    (as SQLite's ``lower()`` does: the rule every backend follows)."""

    @staticmethod
    def _id_contains_params(text: str) -> list[Any]:
        """The parameters of ``_ID_CONTAINS_SQL`` for ``text``."""
        return [text]

    @abstractmethod
    async def _read_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str, stale_ok: bool = False,
        session_id: str | None = None,
    ) -> R:
        """Run ``job`` (a room's function applied to a connection) as a read; ``what`` names
        the operation in a translated driver error. ``stale_ok``: the read may be answered
        by a standby (a backend with read replicas; ``session_id`` names the session it
        reads, so one this store just wrote is read where it was written)."""

    @abstractmethod
    async def _write_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str,
        session_id: str | None = None, keeps_heads: bool = False,
    ) -> R:
        """Run ``job`` in a write transaction of its own (``keeps_heads``: it moves no
        session's head, so a backend that keeps heads need not drop them)."""

    @abstractmethod
    async def _create_session(self, record: SessionRecord, initial: Sequence[NewEvent],
                              artifacts: Sequence[NewArtifact],
                              imported: Sequence[ImportedLink]) -> str:
        """``create_session`` once the batch's ids are checked."""

    @abstractmethod
    async def _append(self, session_id: str, events: Sequence[NewEvent],
                      expected_version: int | None,
                      owner: tuple[str, str] | None) -> list[StoredEvent]:
        """``append`` once the batch's ids are checked."""

    @abstractmethod
    async def _save_artifact(self, key: tuple[str, str, str, str], *, mime_type: str,
                             data: bytes, created_at: float, metadata: bytes | None) -> int:
        """``save_artifact`` of the version under ``key`` (app, user, scope, filename)."""

    @abstractmethod
    async def _delete_artifact(self, key: tuple[str, str, str, str]) -> int:
        """``delete_artifact`` of every version under ``key`` (app, user, scope, filename)."""

    @abstractmethod
    def _statement_job(self, sql: str, params: Sequence[Any]
                       ) -> Callable[[Any], list[Any] | Awaitable[list[Any]]]:
        """The job (for ``_read_job``) that returns the rows of one read statement written
        with ``?`` placeholders, given ``params``."""

    @abstractmethod
    def _range_job(self, wanted: RangeRead, build: Callable[[str, list[Any]], list[T]]
                   ) -> Callable[[Any], list[T] | Awaitable[list[T]]]:
        """The job (for ``_read_job``) of one range read of a session's events: the rows
        ``wanted`` names, built by ``build``; it raises SessionNotFoundError for a missing
        session (or one not ``wanted.owner``'s)."""

    @abstractmethod
    async def _cache_write(self, job: Callable[[Any], Awaitable[None] | None], *, what: str,
                           session_id: str | None = None, transaction: bool = False) -> None:
        """Run ``job``, a write of a cache (snapshots, head states, session caches) that moves
        no session's head, in a transaction when ``transaction`` (else it is one statement
        the backend may run as it is); a read-only store keeps no cache and runs nothing."""

    async def _fetch(
        self, sql: str, params: Sequence[Any], *, what: str, stale_ok: bool = False,
        session_id: str | None = None,
    ) -> list[Any]:
        """The rows of one read statement (``?`` placeholders) with ``params``
        (``stale_ok``, ``session_id``: as ``_read_job``)."""
        return await self._read_job(self._statement_job(sql, params), what=what,
                                    stale_ok=stale_ok, session_id=session_id)

    async def _read_range(
        self, session_id: str, build: Callable[[str, list[Any]], list[T]], *, plain: bool,
        backwards: bool, after: int | None, upto: int | None, limit: int | None,
        owner: tuple[str, str] | None,
    ) -> list[T]:
        """One range read of the session's events (plain rows or envelopes, oldest or newest
        first) built by ``build``, where a standby may answer it; SessionNotFoundError for a
        missing session (or one not ``owner``'s)."""
        wanted = RangeRead(session_id=session_id, plain=plain, backwards=backwards,
                           low=seq_bound(after or 0), high=seq_bound(upto), limit=limit,
                           owner=owner)
        return await self._read_job(self._range_job(wanted, build),
                                    what=f"read session {session_id!r}", stale_ok=True,
                                    session_id=session_id)
