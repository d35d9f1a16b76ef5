"""Compaction in the log: record a summary as one more event, and read back from the newest one.

A compaction event has no content; its ``actions.compaction`` (``Compaction``) holds a summary
that stands for the session's events up to ``end_seq``. Nothing is deleted or rewritten: the
covered events stay in the log, every reader that wants them reads them as before. What changes
is what a run *loads*: ``read_compacted`` reads the log backwards only as far as the newest
compaction event, then the few events between the end of its range and the event itself, so
loading a long session after a compaction costs the rows after the compaction, not the history.

This module knows the log's shape only; which ranges may be compacted (no open call inside)
is the runtime's rule (``runtime.compact``, docs/compaction.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ._args import check_lookup, check_seq_bound, shown
from ._events import Compaction, Content, Event, EventActions, Part
from ._exceptions import StoreUsageError

__all__ = ["CompactedHistory", "LogAccess", "compact_session", "read_compacted"]

_FIRST_PAGE = 16
_MAX_PAGE = 1024


class LogAccess(Protocol):
    """The store operations compaction uses (``EventStore`` has them)."""

    async def read(
        self, session_id: str, *, after: int | None = None, upto: int | None = None,
        backwards: bool = False, limit: int | None = None, app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[Event]:
        """Read events with ``after < seq <= upto``."""
        ...

    async def append(
        self, session_id: str, events: Event | list[Event], *, expected_version: int | None,
        app_name: str | None = None, user_id: str | None = None,
    ) -> list[Event]:
        """Append events atomically."""
        ...

    async def version(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> int:
        """The session's newest seq."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactedHistory:
    """What a run loads of a session: the newest compaction and the events after its range.

    Guarantees: ``events`` are the session's events with ``end_seq < seq <= version`` (the
    whole log up to ``version`` when there is no compaction), oldest first, the compaction
    event itself left out; ``compaction`` is the newest compaction event at or below
    ``version``; ``rows_read`` counts the events read to find them.
    """

    compaction: Event | None
    """The newest compaction event (``actions.compaction`` set), or ``None``."""
    events: tuple[Event, ...]
    """The events its summary does not stand for, oldest first (the compaction excluded)."""
    version: int
    """The seq the history was read up to."""
    rows_read: int
    """How many events were read (the compaction event included)."""

    @property
    def summary(self) -> Compaction | None:
        """The newest compaction's record (``None`` without compaction)."""
        return None if self.compaction is None else self.compaction.actions.compaction


def compaction_of(event: Event) -> Compaction | None:
    """The compaction an event records (``None`` for every other event)."""
    return event.actions.compaction


async def read_compacted(
    store: LogAccess, session_id: str, *, upto: int | None = None,
    app_name: str | None = None, user_id: str | None = None,
) -> CompactedHistory:
    """Read the session backwards up to its newest compaction event, then the events between
    that compaction's ``end_seq`` and the event. Pages start small and double; a session
    without compaction is read whole. ``app_name``/``user_id`` pick the session as
    ``EventStore.get_session`` does. Raises SessionNotFoundError."""
    check_lookup(session_id)
    upto = check_seq_bound(upto, "upto")
    newer: list[Event] = []  # newest first
    older: list[Event] = []  # newest first: the rest of the page the compaction was found in
    found: Event | None = None
    cursor, size, rows = upto, _FIRST_PAGE, 0
    version: int | None = upto
    while True:
        page = await store.read(session_id, upto=cursor, backwards=True, limit=size,
                                app_name=app_name, user_id=user_id)
        rows += len(page)
        if version is None:
            version = page[0].seq if page else 0
        for index, event in enumerate(page):
            if event.actions.compaction is not None:
                found, older = event, page[index + 1:]
                break
            newer.append(event)
        if found is not None or len(page) < size:
            break
        last = page[-1].seq
        if last is None or last <= 1:
            break
        cursor, size = last - 1, min(size * 2, _MAX_PAGE)
    newer.reverse()
    if found is None:
        return CompactedHistory(compaction=None, events=tuple(newer), version=version or 0,
                                rows_read=rows)
    record = found.actions.compaction
    assert record is not None
    assert found.seq is not None
    # The events between the range's end and the compaction: those the page held already,
    # then the rest (a compaction is usually made at head, so there is no rest).
    between = [e for e in reversed(older) if (e.seq or 0) > record.end_seq]
    missing_upto = (between[0].seq or 0) - 1 if between else found.seq - 1
    if record.end_seq < missing_upto:
        rest = await store.read(session_id, after=record.end_seq, upto=missing_upto,
                                app_name=app_name, user_id=user_id)
        rows += len(rest)
        between = [*rest, *between]
    return CompactedHistory(compaction=found, events=(*between, *newer),
                            version=version or found.seq, rows_read=rows)


def summary_content(summary: str | Content) -> Content:
    """The summary as the model will see it: a text becomes one ``user`` text part."""
    if isinstance(summary, Content):
        if not summary.parts:
            raise StoreUsageError("A compaction summary needs at least one part.")
        return summary
    if not isinstance(summary, str) or not summary.strip():
        raise StoreUsageError(
            f"A compaction summary must be a non-empty text or a Content, not {shown(summary)}.")
    return Content(role="user", parts=(Part(text=summary),))


async def compact_session(
    store: LogAccess,
    session_id: str,
    *,
    upto: int,
    summary: str | Content,
    author: str = "user",
    invocation_id: str = "",
    branch: str | None = None,
    expected_version: int | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Event:
    """Append a compaction event whose summary stands for the events up to ``upto``; return it.

    ``start_seq`` is the seq after the previous compaction's range (1 for the first). Refuses
    (StoreUsageError, nothing written) an ``upto`` outside ``1..version`` or not past the
    previous compaction's ``end_seq``. The append checks ``expected_version`` (default: the
    version read here), so a session that moved on meanwhile raises ConcurrencyError.
    """
    check_lookup(session_id)
    if not isinstance(upto, int) or isinstance(upto, bool):
        raise StoreUsageError(f"upto must be an int, not {shown(upto)}.")
    content = summary_content(summary)
    version = (await store.version(session_id, app_name=app_name, user_id=user_id)
               if expected_version is None else expected_version)
    if not 1 <= upto <= version:
        raise StoreUsageError(
            f"Session {session_id!r} has events 1..{version}; a compaction must cover up to a "
            f"seq in that range, not {upto}.")
    previous = (await read_compacted(store, session_id, upto=version, app_name=app_name,
                                      user_id=user_id)).summary
    start = 1
    if previous is not None:
        if upto <= previous.end_seq:
            raise StoreUsageError(
                f"Session {session_id!r} is compacted up to seq {previous.end_seq} already; a "
                f"new compaction must cover more (upto > {previous.end_seq}), not {upto}.")
        start = previous.end_seq + 1
    event = Event(
        author=author, invocation_id=invocation_id, branch=branch,
        actions=EventActions(compaction=Compaction(start_seq=start, end_seq=upto,
                                                   summary=content)),
    )
    stored = await store.append(session_id, [event], expected_version=version,
                                app_name=app_name, user_id=user_id)
    return stored[0]
