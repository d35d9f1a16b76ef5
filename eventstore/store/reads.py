"""The store façade's mapping reads: events as plain JSON mappings, or converted as decoded.

For readers that build objects of their own from events (framework adapters) or need a field or
two of many events: no ``Event`` is built. Rows of the current schema version are read as plain
rows (no envelope object per row); a log holding older rows is read again as envelopes, which
upcast. Knows no SQL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from eventstore._args import check_bool, check_lookup, check_number, check_seq_bound
from eventstore._exceptions import StoreUsageError
from eventstore._statefold import decode_mappings, decode_row_mappings, in_seq_order
from eventstore.backends.protocol import Backend

__all__ = ["MappingReads"]

T = TypeVar("T")


class MappingReads:
    """Mixed into EventStore: ``read_mappings`` and ``read_converted``."""

    def _open_backend(self) -> Backend:  # pragma: no cover - EventStore defines it
        raise NotImplementedError

    async def _keyed(  # pragma: no cover - EventStore defines it
        self, session_id: str, app_name: str | None, user_id: str | None,
        work: Callable[[str, tuple[str, str]], Awaitable[T]],
    ) -> T:
        raise NotImplementedError

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
