"""The OpenAI Agents SDK's ``Session`` protocol on the event store (``pip install
'agent-eventstore[openai-agents]'``)::

    result = await Runner.run(agent, "Hi", session=EventStoreSession("chat-1", "sessions.db"))

Append-only underneath: ``add_items`` appends one event per item (all in one atomic append);
``pop_item`` appends a *pop* event naming the item it removes, ``clear_session`` a *clear*
event; no row is ever deleted or changed, so the whole history (including what was popped or
cleared) stays in the log for ``evs show``. What an event means lives under
``custom_metadata["openai_agents"]``: ``{"item": <the item>}``, ``{"pop": <seq of the item>}`` or
``{"clear": true}``. Items are also mirrored natively where the event model has a field
(message text, function calls and their outputs), for ``evs show`` and ``evs pending``. The
SDK's call ids may repeat in a session (``call_0`` from a server that numbers each response's
calls, ids used again after ``clear_session``) while the log's must not, so a call is mirrored
under ``<SDK id>@<event id>`` (``mirrored_call_id``) and its output as the response to that id;
the items keep the SDK's ids exactly.

The items at head are read newest first and the read stops at the newest *clear* or once ``limit``
items are found: a read costs what it returns (plus the pops it skips), never a replay of the whole
log. A full ``get_items()`` also keeps the items at head in memory, as their JSON bytes, with the
seq and id of the newest event it has seen (``HeadCache``): the next read asks the log only for the
events after that seq (plus that event, to check the cache still describes this log — a deleted and
re-created session does not match) and applies them. The cache is only ever derived from the log:
folding the events after its seq onto it gives what a fresh read of the log gives
(``tests/eventstore/integrations/openai_agents/test_contract_openai_agents.py`` checks it).

Compaction without deleting anything (``compaction``): ``run_compaction`` (the SDK's
``OpenAIResponsesCompactionAwareSession`` protocol, which the Runner calls after each turn) and
``compact`` record a compaction event followed by the summary items; reads stop at it as at a
clear, so the items at head are the summary plus what came after, and the log keeps the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from agents.memory.openai_responses_compaction_session import (
    default_should_trigger_compaction,
    select_compaction_candidate_items,
)
from agents.memory.session_settings import SessionSettings, resolve_session_limit
from agents.run_internal.items import normalize_input_items_for_api

from eventstore import (
    Compaction,
    ConcurrencyError,
    Event,
    EventActions,
    EventStore,
    SessionNotFoundError,
    StoreClosedError,
    StoreUsageError,
    new_event_id,
)

from .._handle import StoreHandle
from .compaction import (
    CompactionRequest,
    Compactor,
    summary_content,
    unanswered_calls,
)
from .items import (
    CACHE_NAME,
    METADATA_KEY,
    HeadCache,
    SessionItemError,
    call_id_of,
    mirrored_call_id,
    native_mirror,
    plain_item,
)

__all__ = ["EventStoreSession"]

logger = logging.getLogger("eventstore.integrations.openai_agents")

_PAGE = 512
_NONE: dict[str, Any] = {}
_SAVE_AFTER = 256
"""A full read that had to fold this many events or more saves the store cache."""


class EventStoreSession:
    """An OpenAI Agents SDK session (the ``Session`` protocol) kept in the event store.

    ``url_or_store`` is a store URL (``memory://`` by default — private to this object, like
    ``SQLiteSession()``'s in-memory database; a SQLite path; ``postgresql://…``), opened on first
    use and closed by ``close()``, or an open EventStore, left open. The store session is
    created on the first ``add_items`` under ``app_name``/``user_id``. ``session_settings``
    (a ``SessionSettings`` or a mapping of its fields, as the SDK's sessions take) gives the
    default ``limit`` of ``get_items``.

    Usable from any thread and event loop, at once, as ``Runner.run_sync`` does from worker
    threads: a store opened from a URL lives on the integrations' home loop (a thread of its
    own) and every method is one hop there, but a SQLite file also gets a store on the first
    loop that calls the session, which that loop uses with no hop (until it closes: then the
    next loop to call takes it over); a given store is used on its own loop (``StoreHandle``
    in ``eventstore.integrations._handle``). Bad input raises TypeError as
    the SDK's sessions do (``SessionItemError`` for items, which nothing stores).

    Compaction (docs/frameworks.md): with a ``compactor`` (``ResponsesCompactor()`` calls
    OpenAI's ``responses.compact``), the session is one the Runner compacts after a turn when
    ``should_trigger_compaction`` (the SDK's hook and context; default: the SDK's own, 10
    candidate items) says so, deferred past turns with local tool outputs as the SDK defers.
    ``compact(items)`` records given summary items. Either way nothing is deleted: the
    summary is a compaction event and item events after it, and ``get_items()`` returns the
    summary items plus the items added since.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        url_or_store: str | os.PathLike[str] | EventStore = "memory://",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        *,
        app_name: str = "openai-agents",
        user_id: str = "default",
        compactor: Compactor | None = None,
        should_trigger_compaction: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise StoreUsageError(f"session_id must be a non-empty string, not {session_id!r}.")
        self.session_id = session_id
        self.session_settings = _settings(session_settings)
        self._handle = StoreHandle(url_or_store, home_loop=True, local_first=True)
        self._app_name = app_name
        self._user_id = user_id
        self._cache: HeadCache | None = None
        self.compactor = compactor
        self.should_trigger_compaction = (should_trigger_compaction
                                          or default_should_trigger_compaction)
        self._deferred_response_id: str | None = None

    def _sibling(self, session_id: str) -> EventStoreSession:
        """A session ``session_id`` of the same store, app and user, sharing this session's
        store (an agent tool's child session): closing it is closing this one's store."""
        sibling = EventStoreSession(session_id, session_settings=self.session_settings,
                                    app_name=self._app_name, user_id=self._user_id)
        sibling._handle = self._handle
        return sibling

    async def _scan(self, store: EventStore, *, limit: int | None,
                    upto: int | None = None) -> list[tuple[int, Any]]:
        """``(seq, item)`` of the newest ``limit`` items at ``upto`` (all when None), newest
        first: pages of the log read backwards in the stored encoding (the item is all that is
        needed of an event, so the rest is not expanded), until the newest clear."""
        found: list[tuple[int, Any]] = []
        popped: set[int] = set()
        size = _PAGE if limit is None else min(max(limit, 1) + 8, _PAGE)
        cursor = upto
        while True:
            try:
                page = await store.read_mappings(self.session_id, upto=cursor, backwards=True,
                                                 limit=size, compact=True,
                                                 app_name=self._app_name, user_id=self._user_id)
            except SessionNotFoundError:
                return []
            for event in page:
                meaning = event.get("m", _NONE).get(METADATA_KEY)
                if not isinstance(meaning, dict):
                    continue
                if meaning.get("clear") is True or "compaction" in meaning:
                    return found
                if "pop" in meaning:
                    popped.add(meaning["pop"])
                elif "item" in meaning and event["seq"] not in popped:
                    found.append((event["seq"], meaning["item"]))
                    if limit is not None and len(found) >= limit:
                        return found
            if len(page) < size or page[-1]["seq"] <= 1:
                return found
            cursor = page[-1]["seq"] - 1
            size = min(size * 4, _PAGE * 8)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """Return the items at head, oldest first — the newest ``limit`` of them when given
        (``limit`` defaults to ``session_settings.limit``; 0 gives none, a negative one all).
        A ``limit`` that is not an int raises TypeError."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise TypeError(f"limit must be an int or None, not {limit!r}.")
        resolved = resolve_session_limit(limit, self.session_settings)
        if resolved is not None and resolved == 0:
            return []
        wanted = resolved if resolved and resolved > 0 else None
        return await self._handle.run(lambda store: self._get_items(store, wanted))

    async def _get_items(self, store: EventStore, limit: int | None) -> list[Any]:
        cache = await self._refresh(store)
        if cache is not None:
            return cache.decoded(limit)
        if limit is not None:
            found = await self._scan(store, limit=limit)
            return [item for _, item in reversed(found)]
        return (await self._rebuild(store)).decoded(None)

    async def _refresh(self, store: EventStore) -> HeadCache | None:
        """The cache brought up to the log's head, or None (and dropped) when there is none or
        it no longer describes this session's log."""
        cache = self._cache
        if cache is None:
            return None
        try:
            newer = await store.read_mappings(self.session_id, after=cache.version - 1,
                                              compact=True, app_name=self._app_name,
                                              user_id=self._user_id)
        except SessionNotFoundError:
            newer = []
        if not newer or newer[0]["seq"] != cache.version or newer[0]["id"] != cache.event_id:
            self._cache = None
            return None
        for event in newer[1:]:
            cache.apply(event)
        return cache

    async def _rebuild(self, store: EventStore) -> HeadCache:
        """Read the items at head and keep them as the cache (when non-empty): from the
        store's cache of them when it still describes the log, brought up to head; else from
        the log. A read that folded many events saves the store's cache for the next one."""
        try:
            head = await store.read_mappings(self.session_id, backwards=True, limit=1,
                                             compact=True, app_name=self._app_name,
                                             user_id=self._user_id)
        except SessionNotFoundError:
            head = []
        if not head:
            return HeadCache({}, 0, "")
        newest = head[0]
        cache = await self._load_saved(store, newest["seq"])
        base = 0 if cache is None else cache.version
        if cache is None:
            found = await self._scan(store, limit=None, upto=newest["seq"])
            cache = HeadCache(dict(reversed(found)), newest["seq"], newest["id"])
        if newest["seq"] - base >= _SAVE_AFTER:
            with contextlib.suppress(SessionNotFoundError):
                await store.save_cache(self.session_id, CACHE_NAME, cache.version,
                                       cache.to_bytes(), app_name=self._app_name,
                                       user_id=self._user_id)
        self._cache = cache
        return cache

    async def _load_saved(self, store: EventStore, upto: int) -> HeadCache | None:
        """The store's cache of the items, brought up to ``upto``, or None when there is none
        or it does not describe this log (its event is not the log's event at its seq)."""
        saved = await store.load_cache(self.session_id, CACHE_NAME, app_name=self._app_name,
                                       user_id=self._user_id)
        if saved is None or not 0 < saved[0] <= upto:
            return None
        cache = HeadCache.from_bytes(*saved)
        if cache is None:
            return None
        try:
            newer = await store.read_mappings(self.session_id, after=cache.version - 1,
                                              upto=upto, compact=True,
                                              app_name=self._app_name, user_id=self._user_id)
        except SessionNotFoundError:
            return None
        if not newer or newer[0]["seq"] != cache.version or newer[0]["id"] != cache.event_id:
            return None
        for event in newer[1:]:
            cache.apply(event)
        return cache

    async def _open_calls(self, store: EventStore, wanted: Counter[str]) -> dict[str, list[str]]:
        """For each SDK call id of ``wanted``, the mirrored ids of the newest calls with it (up to
        that many) that no output still in the session answers (popped items and what came
        before a clear do not count), oldest first: the log read newest first, only until they
        are found."""
        found: dict[str, list[str]] = {}
        answered: set[str] = set()
        popped: set[Any] = set()
        missing = sum(wanted.values())
        try:
            async for event in store.iter_backwards(self.session_id, app_name=self._app_name,
                                                    user_id=self._user_id):
                meaning = event.custom_metadata.get(METADATA_KEY)
                if not isinstance(meaning, dict) or meaning.get("clear") is True \
                        or "compaction" in meaning:
                    if isinstance(meaning, dict):
                        break  # nothing before a clear or a compaction is in the session
                    continue
                if "pop" in meaning:
                    popped.add(meaning["pop"])
                    continue
                item = meaning.get("item")
                if not isinstance(item, dict) or event.seq in popped:
                    continue  # a popped output answers nothing any more
                answered.update(r.id for r in event.function_responses())
                call = call_id_of(item, "function_call")
                if call is None or call not in wanted:
                    continue
                calls = found.setdefault(call, [])
                for mirrored in event.function_calls():
                    if mirrored.id not in answered and len(calls) < wanted[call]:
                        calls.insert(0, mirrored.id)
                        missing -= 1
                if not missing:
                    break
        except SessionNotFoundError:
            return {}
        return found

    async def add_items(self, items: list[Any]) -> None:
        """Append the items, in order, atomically (one event per item). Raises
        SessionItemError (a TypeError) when ``items`` is not a list of JSON mappings, having
        stored none of them.

        Function calls and their outputs are mirrored natively too: a call under
        ``mirrored_call_id`` (unique in the session whatever ids the SDK gives), an output as
        the response to a call with its SDK id that has no output yet: the oldest of this
        batch, else of the newest such calls in the log (read newest first until found).
        """
        if not isinstance(items, (list, tuple)):
            raise SessionItemError(
                f"add_items takes a list of items, not a {type(items).__name__}: {items!r:.80}.")
        if not items:
            if self._handle.closed:
                raise StoreClosedError()
            return
        plains = [plain_item(item, index) for index, item in enumerate(items)]
        await self._handle.run(lambda store: self._append_items(store, plains))

    async def _append_items(self, store: EventStore, plains: list[dict[str, Any]]) -> None:
        event_ids = [new_event_id() for _ in plains]
        # Which outputs answer a call of this batch, and which need the log.
        open_here: dict[str, list[str]] = {}
        answers: list[str | None] = []
        earlier: Counter[str] = Counter()
        for plain, event_id in zip(plains, event_ids, strict=True):
            answers.append(None)
            if (call := call_id_of(plain, "function_call")) is not None:
                open_here.setdefault(call, []).append(mirrored_call_id(call, event_id))
            elif (output := call_id_of(plain, "function_call_output")) is not None:
                if open_here.get(output):
                    answers[-1] = open_here[output].pop(0)
                else:
                    earlier[output] += 1
        if earlier:
            from_log = await self._open_calls(store, earlier)
            for index, plain in enumerate(plains):
                output = call_id_of(plain, "function_call_output")
                if answers[index] is None and output is not None and from_log.get(output):
                    answers[index] = from_log[output].pop(0)
        events = []
        for plain, event_id, answer in zip(plains, event_ids, answers, strict=True):
            author, content = native_mirror(plain, event_id, answer)
            events.append(Event(author=author, id=event_id, content=content,
                                custom_metadata={METADATA_KEY: {"item": plain}}))
        await self._append(store, events)

    async def _append(self, store: EventStore, events: list[Event]) -> None:
        # The first items (or the session was deleted): the append creates it.
        await store.append(self.session_id, events, expected_version=None,
                           app_name=self._app_name, user_id=self._user_id, create=True)

    async def pop_item(self) -> Any | None:
        """Remove the newest item and return it (None when there is none): appends a pop event
        checked against the version the item was found at, retrying when another writer got
        in between."""
        return await self._handle.run(self._pop_item)

    async def _pop_item(self, store: EventStore) -> Any | None:
        while True:
            try:
                version = await store.version(self.session_id, app_name=self._app_name,
                                              user_id=self._user_id)
            except SessionNotFoundError:
                return None
            found = await self._scan(store, limit=1, upto=version)
            if not found:
                return None
            seq, item = found[0]
            try:
                await store.append(
                    self.session_id,
                    Event(author="user", custom_metadata={METADATA_KEY: {"pop": seq}}),
                    expected_version=version, app_name=self._app_name, user_id=self._user_id,
                )
            except ConcurrencyError:
                continue
            return item

    async def clear_session(self) -> None:
        """Forget every item: appends a clear event (the log keeps what was cleared)."""
        await self._handle.run(self._clear_session)

    async def _clear_session(self, store: EventStore) -> None:
        try:
            await store.append(
                self.session_id,
                Event(author="user", custom_metadata={METADATA_KEY: {"clear": True}}),
                expected_version=None, app_name=self._app_name, user_id=self._user_id,
            )
        except SessionNotFoundError:
            return

    async def compact(self, summary_items: Sequence[Any]) -> int:
        """Record ``summary_items`` (SDK items, e.g. ``responses.compact``'s output) as standing
        for every item at head now, and return the seq of the compaction event. From then on
        ``get_items()`` is the summary items plus the items added after; the log keeps every
        item. Raises SessionItemError for items that cannot be stored, StoreUsageError when
        ``summary_items`` is empty or the session has no items (nothing is written then)."""
        if not isinstance(summary_items, (list, tuple)) or not summary_items:
            raise StoreUsageError(
                f"compact takes a non-empty list of summary items, not {summary_items!r:.80}.")
        plains = [plain_item(item, index) for index, item in enumerate(summary_items)]
        return await self._handle.run(lambda store: self._record_compaction(store, plains))

    async def _head(self, store: EventStore) -> tuple[int, list[Any]]:
        """The log's version and the items at head at exactly that version."""
        cache = await self._refresh(store) or await self._rebuild(store)
        return cache.version, cache.decoded(None)

    async def _record_compaction(self, store: EventStore, plains: list[dict[str, Any]],
                                 version: int | None = None) -> int:
        """Append the compaction event and the summary items after it, atomically, checked
        against ``version`` (the version the summarized items were read at; default: head)."""
        if version is None:
            version, items = await self._head(store)
            if not items:
                raise StoreUsageError(
                    f"Session {self.session_id!r} has no items to compact.")
        history = await store.read_compacted(self.session_id, upto=version,
                                             app_name=self._app_name, user_id=self._user_id)
        start = 1 if history.summary is None else history.summary.end_seq + 1
        marker = Event(author="user", actions=EventActions(compaction=Compaction(
            start_seq=start, end_seq=version, summary=summary_content(plains))),
            custom_metadata={METADATA_KEY: {"compaction": len(plains)}})
        events = [marker, *(Event(author="user", custom_metadata={METADATA_KEY: {"item": p}})
                            for p in plains)]
        stored = await store.append(self.session_id, events, expected_version=version,
                                    app_name=self._app_name, user_id=self._user_id)
        seq = stored[0].seq
        assert seq is not None
        return seq

    async def run_compaction(self, args: Mapping[str, Any] | None = None, *,
                             wrapper: Any = None) -> None:
        """Compact when due: the SDK's ``OpenAIResponsesCompactionAwareSession.run_compaction``
        (the Runner calls it after a turn with ``response_id``; ``force`` skips the hook).

        Without a ``compactor`` it does nothing (a forced call raises StoreUsageError). Else it
        reads the items at head, asks ``should_trigger_compaction`` (the SDK's context:
        ``response_id``, ``compaction_mode``, ``compaction_candidate_items``,
        ``session_items``), and records the compactor's summary (``compact``) checked against
        the version it read. It skips, logging why, when the items hold a tool call with no
        output yet, when the compactor returns nothing, or when another writer moved the
        session meanwhile (the next turn tries again). Nothing is ever deleted."""
        args = dict(args or {})
        force = bool(args.get("force", False))
        if self.compactor is None:
            if force:
                raise StoreUsageError(
                    f"Session {self.session_id!r} has no compactor: pass compactor= to "
                    "EventStoreSession, or record summary items with compact().")
            return
        response_id = args.get("response_id")
        mode = args.get("compaction_mode")
        mode = mode if mode in ("input", "previous_response_id") else None
        version, raw = await self._handle.run(self._head)
        items = normalize_input_items_for_api(raw)
        if not force and not self.should_trigger_compaction(
                self._compaction_context(response_id, mode, items)):
            return
        open_calls = unanswered_calls(items)
        if not items or open_calls:
            logger.info("Not compacting session %r: %s.", self.session_id,
                        f"call {open_calls[0]!r} has no output yet" if open_calls
                        else "no items")
            return
        summary = await self.compactor(CompactionRequest(
            session_id=self.session_id, items=tuple(items), version=version,
            response_id=response_id if isinstance(response_id, str) else None, mode=mode,
            wrapper=wrapper))
        if not summary:
            logger.warning("Not compacting session %r: the compactor returned no items.",
                           self.session_id)
            return
        plains = [plain_item(item, index) for index, item in enumerate(summary)]
        try:
            await self._handle.run(
                lambda store: self._record_compaction(store, plains, version))
        except ConcurrencyError:
            logger.warning("Not compacting session %r: it moved past seq %d while the summary "
                           "was made.", self.session_id, version)
            return
        self._deferred_response_id = None

    def _compaction_context(self, response_id: Any, mode: str | None,
                            items: list[Any]) -> dict[str, Any]:
        return {"response_id": response_id, "compaction_mode": mode or "input",
                "compaction_candidate_items": select_compaction_candidate_items(items),
                "session_items": items}

    async def _defer_compaction(self, response_id: str, store: bool | None = None) -> None:
        """The Runner's hook for a turn that ended with local tool outputs: when compaction
        is due, compact (forced) after the next turn instead."""
        if self.compactor is None or self._deferred_response_id is not None:
            return
        _, raw = await self._handle.run(self._head)
        items = normalize_input_items_for_api(raw)
        if self.should_trigger_compaction(self._compaction_context(response_id, None, items)):
            self._deferred_response_id = response_id

    def _get_deferred_compaction_response_id(self) -> str | None:
        return self._deferred_response_id

    def _clear_deferred_compaction(self) -> None:
        self._deferred_response_id = None

    def close(self) -> _Closed:
        """Close the store if this session opened it from a URL; later calls raise
        StoreClosedError. Like ``SQLiteSession.close()`` it is done when it returns (the
        caller waits the few milliseconds closing takes); ``await session.close()`` works too.
        """
        self._handle.close_now()
        return _Closed()


class _Closed:
    """What ``close()`` returns: awaiting it is a no-op (closing is already done), so code
    written when ``close`` was a coroutine keeps working."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


def _settings(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    """``session_settings`` as the SDK's sessions take it: None (the defaults), an instance,
    or a mapping of its fields (an unknown field or another type raises TypeError)."""
    if value is None:
        return SessionSettings()
    if isinstance(value, SessionSettings):
        return value
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(SessionSettings)}
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise TypeError(f"Unknown session settings: {', '.join(unknown)} (known: "
                            f"{', '.join(sorted(fields))}).")
        return SessionSettings(**dict(value))
    raise TypeError(f"session_settings must be a SessionSettings or a mapping of its fields, "
                    f"not {type(value).__name__}: {value!r:.80}.")
