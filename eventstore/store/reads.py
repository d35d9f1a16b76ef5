"""The store's reads: events (``EventReads``: pages, backward scans, the live tail, the
signature check) and events as plain JSON mappings, or converted as decoded (``MappingReads``).

Mapping reads are for readers that build objects of their own from events (framework
adapters) or need a field or two of many events: no ``Event`` is built. Rows of the current
schema version are read as plain rows (no envelope object per row); a log holding older rows is
read again as envelopes, which upcast. Knows no SQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from eventstore._args import check_bool, check_int, check_lookup, check_number, check_seq_bound
from eventstore._chain_check import SignatureProblem, signature_problems
from eventstore._events import Event
from eventstore._exceptions import SessionNotFoundError, StoreUsageError
from eventstore._statefold import decode_all, decode_mappings, decode_row_mappings, in_seq_order
from eventstore.backends.protocol import Backend

from .addressing import StoreBase

__all__ = ["EventReads", "MappingReads"]

T = TypeVar("T")


class EventReads(StoreBase):
    """Mixed into EventStore: ``read``, ``iter_backwards``, ``subscribe``, ``version`` and
    ``untrusted``."""

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[Event]:
        """Return events with ``after < seq <= upto``, oldest first, or newest first when
        ``backwards`` — at most ``limit`` of them, read in one page."""
        self._open_backend()

        async def page(key: str, owner: tuple[str, str]) -> list[Event]:
            return await self._read_key(key, after=after, upto=upto, backwards=backwards,
                                        limit=limit, owner=owner)

        return await self._keyed(check_lookup(session_id), app_name, user_id, page)

    async def _read_key(
        self,
        key: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
        owner: tuple[str, str] | None = None,
    ) -> list[Event]:
        """``read`` of the session stored under ``key`` (``owner``'s: see ``Backend.read``)."""
        backend = self._open_backend()
        after = check_seq_bound(after, "after")
        upto = check_seq_bound(upto, "upto")
        backwards = check_bool(backwards, "backwards")
        rows = await backend.read(key, after=after, upto=upto, backwards=backwards,
                                  limit=check_seq_bound(limit, "limit", minimum=0), owner=owner)
        return decode_all(in_seq_order(key, rows, after=after, upto=upto, backwards=backwards))

    async def iter_backwards(
        self,
        session_id: str,
        *,
        upto: int | None = None,
        page_size: int = 8,
        max_page_size: int = 512,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """Yield events newest first, reading pages lazily, so a scan can stop early.

        Pages start at ``page_size`` events and double up to ``max_page_size``: a scan that stops
        after a few events reads (and decodes) only a few, a long one needs few round trips.
        """
        check_int(page_size, "page_size", minimum=1)
        check_int(max_page_size, "max_page_size", minimum=page_size)
        cursor = check_seq_bound(upto, "upto")
        size = page_size
        while True:
            page = await self.read(session_id, upto=cursor, backwards=True, limit=size,
                                   app_name=app_name, user_id=user_id)
            for event in page:
                yield event
            if len(page) < size:
                return
            cursor = page[-1].seq - 1 if page[-1].seq is not None else 0
            if cursor <= 0:
                return
            size = min(size * 2, max_page_size)

    @property
    def keyed(self) -> bool:
        """Whether the store signs the events it appends (``open_store(signing_key=…)``)."""
        return self._backend.signing_key is not None

    async def untrusted(
        self,
        session_id: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[int, SignatureProblem]:
        """Return ``seq -> problem`` for the events with ``after < seq <= upto`` whose
        signature under the store's key is missing (``unsigned``) or wrong
        (``bad_signature``): events someone wrote behind the store's back, or before it was
        keyed. The runner executes nothing from them. An unkeyed store returns ``{}`` without
        reading. Raises SessionNotFoundError."""
        backend = self._open_backend()
        key = backend.signing_key
        if key is None:
            return {}
        low, high = check_seq_bound(after, "after"), check_seq_bound(upto, "upto")

        async def check(sid: str, owner: tuple[str, str]) -> dict[int, SignatureProblem]:
            rows = await backend.read(sid, after=low, upto=high, backwards=False, limit=None,
                                      owner=owner)
            return signature_problems(sid, rows, key)

        return await self._keyed(check_lookup(session_id), app_name, user_id, check)

    async def version(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> int:
        """Return the session's version: the ``seq`` of its newest event (0 when empty)."""
        return (await self._record(session_id, app_name=app_name, user_id=user_id)).version

    async def subscribe(
        self,
        session_id: str,
        *,
        after: int = 0,
        poll_interval: float = 1.0,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the session's events after ``after`` and then new ones as they are appended.

        Never skips or repeats an event: it re-reads from its cursor after every wake-up (a
        notification or ``poll_interval`` seconds). Ends when the session is deleted (even
        when another session of another user is given its key then). Raises
        SessionNotFoundError when there is no such session to start with.
        """
        cursor = check_seq_bound(after, "after") or 0
        check_number(poll_interval, "poll_interval")

        async def first(key: str, owner: tuple[str, str]
                        ) -> tuple[str, tuple[str, str], list[Event]]:
            return key, owner, await self._read_key(key, after=cursor, limit=500, owner=owner)

        key, owner, page = await self._keyed(check_lookup(session_id), app_name, user_id, first)
        while True:
            for event in page:
                yield event
                cursor = event.seq if event.seq is not None else cursor
            if len(page) < 500:
                try:
                    await self._open_backend().wait_for_events(
                        key, after=cursor, max_wait=poll_interval
                    )
                except SessionNotFoundError:
                    return  # deleted between the read and the wait
            try:
                page = await self._read_key(key, after=cursor, limit=500, owner=owner)
            except SessionNotFoundError:
                return


class MappingReads(StoreBase):
    """Mixed into EventStore: ``read_mappings`` and ``read_converted``."""

    async def read_mappings(
        self,
        session_id: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
        since: float | None = None,
        compact: bool = False,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Like ``read``, but each event as the plain JSON mapping it is stored as (the fields
        of ``Event``, upcast to the current schema, ``seq`` set), without building Event
        objects: for readers that need one or two fields of many events, or build their own
        objects (an order of magnitude cheaper than ``read``). ``since=T`` keeps only events
        whose timestamp is ``>= T`` (``limit`` then counts those, newest ones when
        ``backwards``). ``compact=True`` gives each event in the stored encoding instead (schema
        version 2, ``docs/protocol.md``: short keys, defaults omitted) with ``id``, ``author``,
        ``invocation_id``, ``timestamp`` and ``seq`` added — what the payload holds, without
        expanding it (cheaper again). Raises CorruptEventError for a payload that is not a JSON
        object (``compact``: not a stored payload of schema version 2)."""
        return await self._mappings(session_id, None, after=after, upto=upto,
                                    backwards=backwards, limit=limit, since=since,
                                    compact=compact, app_name=app_name, user_id=user_id)

    async def read_converted(
        self,
        session_id: str,
        convert: Callable[[dict[str, Any]], T],
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
        since: float | None = None,
        compact: bool = False,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[T]:
        """``read_mappings`` with ``convert`` applied to each mapping as it is decoded: the
        list holds what ``convert`` returned, in the same order. For adapters that turn events
        into objects of their own: one pass, with the cyclic garbage collector paused over a
        long read (no mapping outlives its conversion) and what ``convert`` built then moved
        to the collector's oldest generation without a traversal (``eventstore._gcpause``).
        ``convert`` must not keep state between calls: for a log that mixes schema versions it
        runs again on the events it already saw. What it raises propagates unchanged."""
        if not callable(convert):
            raise StoreUsageError(f"convert must be callable, not {convert!r}.")
        return await self._mappings(session_id, convert, after=after, upto=upto,
                                    backwards=backwards, limit=limit, since=since,
                                    compact=compact, app_name=app_name, user_id=user_id)

    async def _mappings(
        self,
        session_id: str,
        convert: Callable[[dict[str, Any]], Any] | None,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        since: float | None,
        compact: bool,
        app_name: str | None,
        user_id: str | None,
    ) -> list[Any]:
        backend = self._open_backend()
        given = check_lookup(session_id)
        after = check_seq_bound(after, "after")
        upto = check_seq_bound(upto, "upto")
        backwards = check_bool(backwards, "backwards")
        limit = check_seq_bound(limit, "limit", minimum=0)
        compact = check_bool(compact, "compact")
        if since is not None:
            since = check_number(since, "since", positive=False)

        async def read(key: str, owner: tuple[str, str]) -> list[Any]:
            return await self._read_mappings(backend, key, convert, after=after, upto=upto,
                                             backwards=backwards, limit=limit, since=since,
                                             compact=compact, owner=owner)

        return await self._keyed(given, app_name, user_id, read)

    @staticmethod
    async def _read_mappings(
        backend: Backend,
        session_id: str,
        convert: Callable[[dict[str, Any]], Any] | None,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        since: float | None,
        compact: bool,
        owner: tuple[str, str] | None = None,
    ) -> list[Any]:
        """``_mappings`` of the session stored under the key ``session_id`` (``owner``'s:
        see ``Backend.read``)."""
        if since is None:
            # Plain rows first (no StoredEvent per row: a third of the read); a log holding
            # events of an older schema version is read again as StoredEvents, which upcast.
            plain = await backend.read_rows(
                session_id, after=after, upto=upto, backwards=backwards, limit=limit,
                owner=owner
            )
            plain = in_seq_order(session_id, plain, after=after, upto=upto, backwards=backwards)
            decoded = decode_row_mappings(session_id, plain, compact=compact, convert=convert)
            if decoded is not None:
                return decoded
            rows = await backend.read(
                session_id, after=after, upto=upto, backwards=backwards, limit=limit,
                owner=owner
            )
            rows = in_seq_order(session_id, rows, after=after, upto=upto, backwards=backwards)
            return decode_mappings(rows, compact=compact, convert=convert)
        rows = await backend.read_since(
            session_id, timestamp=since, upto=upto,
            newest=limit if backwards and after is None else None, owner=owner,
        )
        rows = in_seq_order(session_id, rows, upto=upto)
        if after is not None:
            rows = [r for r in rows if r.seq > after]
        if backwards:
            rows.reverse()
        return decode_mappings(rows if limit is None else rows[:limit], compact=compact,
                               convert=convert)
