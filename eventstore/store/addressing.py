"""The store's base: its lifecycle (the backend it owns, the event loop it belongs to) and
addressing: which backend key the session a call names is stored under, kept per (app, user,
id) so a fully addressed call costs no lookup. Every other room of the store mixes into
``StoreBase``. Knows no SQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self, TypeVar

from eventstore._args import check_int, check_lookup, check_str
from eventstore._exceptions import (
    AmbiguousSessionError,
    SessionNotFoundError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore._statefold import DEFAULT_SNAPSHOT_INTERVAL, StateFolder
from eventstore.backends.protocol import Backend, SessionRecord

__all__ = ["StoreBase"]

_KEYS_KEPT = 8_192
"""How many (app, user, id) -> key resolutions a store keeps (it starts over when full)."""


T = TypeVar("T")


class StoreBase:
    """What every room of ``EventStore`` builds on: the backend, the loop, the session keys."""

    def __init__(
        self,
        backend: Backend,
        *,
        snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL,
        write_refusal: str | None = None,
    ) -> None:
        check_int(snapshot_interval, "snapshot_interval", minimum=1)
        self._backend = backend
        self._folder = StateFolder(backend, snapshot_interval=snapshot_interval)
        self._closed = False
        self._write_refusal = write_refusal
        self._keys: dict[tuple[str, str, str], str] = {}
        """(app, user, id the app gave) -> the session's key, for sessions this store made or
        found: a fully addressed call costs no lookup (see ``_key``)."""
        self._owners: dict[str, set[tuple[str, str]]] = {}
        """Given id -> the (app, user) pairs ``_keys`` holds it for (bare ids' fast path)."""
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # built outside a loop: it belongs to the first loop using it

    @property
    def url(self) -> str:
        """Where the data lives (without secrets)."""
        return self._backend.url

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop this store belongs to: the one it was opened on (or, when it was
        built outside a running loop, the first one that used it; None until then). Its
        methods are awaited on that loop only: awaited on another one they raise
        StoreUsageError at once (``aclose`` excepted), since the backends' connections, locks
        and wake-ups belong to their loop. From another thread, hand the call to that loop
        (``asyncio.run_coroutine_threadsafe``) or open one store per loop."""
        return self._loop

    @property
    def backend(self) -> Backend:
        """The storage backend (for maintenance tools; applications use the store's methods)."""
        return self._backend

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the store; later calls raise StoreClosedError. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            await self._backend.aclose()

    def _open_backend(self) -> Backend:
        if self._closed:
            raise StoreClosedError()
        if asyncio.get_running_loop() is not self._loop:
            self._bind_loop()
        return self._backend

    def _writable_backend(self) -> Backend:
        """The backend, for a call that writes: StoreUsageError when this store may only read
        (``write_refusal``: e.g. it was opened without the key on a keyed database)."""
        backend = self._open_backend()
        if self._write_refusal is not None:
            raise StoreUsageError(self._write_refusal)
        return backend

    def _bind_loop(self) -> None:
        """Bind a store built outside a loop to the running one; refuse any other loop."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            return
        raise StoreUsageError(
            f"The store {self.url} was opened on another event loop and is used from this "
            "one; it belongs to the loop it was opened on (its connections, locks and "
            "wake-ups do). Await it on that loop (from another thread: "
            "asyncio.run_coroutine_threadsafe), or open one store per event loop (e.g. per "
            "thread or per asyncio.run())."
        )

    def _remember(self, app_name: str, user_id: str, session_id: str, key: str) -> None:
        if len(self._keys) >= _KEYS_KEPT:
            self._keys.clear()
            self._owners.clear()
        self._keys[(app_name, user_id, session_id)] = key
        self._owners.setdefault(session_id, set()).add((app_name, user_id))

    def _forget(self, key: str) -> None:
        for address in [a for a, k in self._keys.items() if k == key]:
            del self._keys[address]
            owners = self._owners.get(address[2])
            if owners is not None:
                owners.discard(address[:2])
                if not owners:
                    del self._owners[address[2]]

    async def _record(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionRecord:
        """The record of the session the app gave ``session_id`` (of ``app_name``'s
        ``user_id`` when given): SessionNotFoundError when there is none,
        AmbiguousSessionError when several (app, user) hold the id and the call did not say
        which."""
        sid = check_lookup(session_id)
        check_str(app_name, "app_name", optional=True)
        check_str(user_id, "user_id", optional=True)
        found = await self._open_backend().find_sessions(sid, app_name=app_name, user_id=user_id)
        if len(found) == 1:
            record = found[0]
            self._remember(record.app_name, record.user_id, sid, record.session_id)
            return record
        if found:
            raise AmbiguousSessionError(sid, [(r.app_name, r.user_id) for r in found])
        detail = " ".join(part for part in (
            f"in app {app_name!r}" if app_name is not None else "",
            f"for user {user_id!r}" if user_id is not None else "") if part)
        raise SessionNotFoundError(sid, detail=f"{detail}." if detail else "")

    async def session_key(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> str:
        """Return the key the session is stored under in the backend
        (``SessionRecord.session_id``: the id the app gave unless another app or user held
        that key when the session was made), for maintenance tools that read the backend
        itself. Always asks the backend (never a cached key). Raises as ``get_session``
        does."""
        return (await self._record(check_lookup(session_id), app_name=app_name,
                                   user_id=user_id)).session_id

    def _cached(
        self, session_id: str, app_name: str | None, user_id: str | None
    ) -> tuple[str, tuple[str, str]] | None:
        """The key and (app, user) this store keeps for the session the call names, or None
        (then ``_record`` finds it)."""
        if app_name is not None and user_id is not None:
            key = self._keys.get((app_name, user_id, session_id))
            if key is not None:
                return key, (app_name, user_id)
        elif app_name is None and user_id is None:
            # A bare id this store made or found for one (app, user) only: no lookup, so one
            # caller's appends keep their order.
            owners = self._owners.get(session_id)
            if owners is not None and len(owners) == 1:
                [(app, user)] = owners
                return self._keys[(app, user, session_id)], (app, user)
        return None

    async def _keyed(
        self, session_id: str, app_name: str | None, user_id: str | None,
        work: Callable[[str, tuple[str, str]], Awaitable[T]],
    ) -> T:
        """``work(key, (app, user))`` on the session the call names: with the key this store
        keeps for it when it has one (no lookup), else the one ``_record`` finds. Another
        process may have deleted that session and made it again under another key: when the
        backend has no session of that (app, user) under a kept key, the key is dropped and
        looked up once more, so a stale key never fails a call (nor, where the backend checks
        ``owner``, writes into the session another (app, user) was given that key for)."""
        cached = self._cached(session_id, app_name, user_id)
        if cached is not None:
            try:
                return await work(*cached)
            except SessionNotFoundError:
                self._forget(cached[0])
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        try:
            return await work(record.session_id, (record.app_name, record.user_id))
        except SessionNotFoundError:
            self._forget(record.session_id)  # deleted meanwhile (by another process, perhaps)
            raise
