"""The part of a compacted session's log the processors decide from, read without the history.

A compaction never covers an open item (``runtime.compact`` refuses it, docs/compaction.md):
every call, confirmation and claim at or below its ``end_seq`` is settled. So what ``pending()``
reports, and what the resume planner and the head rule decide, is read from the events after
the newest compaction's range — plus the few older events the backward scans look at before they
stop (the agent's newest model turn, the head rule's event) and the model turn holding the call
each confirmation request read names: ``pending()`` reports a request by what became of that
call (a request for a call that already has a response can never be answered), so a request
made after a compaction for a call before it needs the call's events too. ``decision_log``
returns that contiguous newest part of the log; the property tests check
``pending(decision_log) == pending(whole log)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Event, EventStore

from ._log import USER_AUTHOR, parse_confirmation_request
from ._resume import HeadScan, ResumeScan

__all__ = ["decision_log", "decision_suffix", "newest_agent"]

_PAGE = 64


def newest_agent(events_newest_first: Iterable[Event]) -> str | None:
    """The author of the newest model turn (``pending()``'s default agent), or ``None``."""
    for event in events_newest_first:
        content = event.content
        if content is not None and content.role == "model" and event.author != USER_AUTHOR:
            return event.author
    return None


class _Wanted:
    """Feeds the scans whose decisions ``pending()`` reports; says when they have seen enough."""

    def __init__(self, agent_name: str | None) -> None:
        self._agent = agent_name
        self._seen: list[Event] = []
        self._head: HeadScan | None = None
        self._resume: ResumeScan | None = None
        self._head_open = self._resume_open = True
        # Calls named by the confirmation requests read whose model turn is not read yet.
        self._requested: set[str] = set()
        if agent_name is not None:
            self._start(agent_name)

    def _start(self, agent: str) -> None:
        self._head, self._resume = HeadScan(agent_name=agent), ResumeScan(agent_name=agent)
        for event in self._seen:
            self._feed(event)
        self._seen.clear()

    def _feed(self, event: Event) -> None:
        assert self._head is not None
        assert self._resume is not None
        if self._head_open:
            self._head_open = self._head.feed(event)
        if self._resume_open:
            self._resume_open = self._resume.feed(event)

    def _note_requests(self, event: Event) -> None:
        content = event.content
        if content is None or content.role != "model" or event.author == USER_AUTHOR:
            return  # pending() reads no other event as a model turn or a trusted request
        calls = event.function_calls()
        for call in calls:
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                parsed = parse_confirmation_request(call)
                if not isinstance(parsed, str):
                    self._requested.add(parsed[0].id)
        self._requested.difference_update(
            c.id for c in calls if c.name != REQUEST_CONFIRMATION_FUNCTION)

    def feed(self, event: Event) -> bool:
        """Take the next older event; True while more are wanted."""
        self._note_requests(event)
        if self._head is None:
            self._seen.append(event)
            agent = newest_agent([event])
            if agent is None:
                return True
            self._start(agent)
        else:
            self._feed(event)
        return self._head_open or self._resume_open or bool(self._requested)


def decision_suffix(events: list[Event], *, agent_name: str | None = None) -> int:
    """Index into oldest-first ``events`` where the part the processors decide from starts:
    the first event after the newest compaction's range, or earlier when the scans need older
    events; 0 without a compaction. Pure: ``decision_log`` reads the same part from a store."""
    newest = next((e for e in reversed(events) if e.actions.compaction is not None), None)
    if newest is None or newest.actions.compaction is None:
        return 0
    end = newest.actions.compaction.end_seq
    start = next(i for i, e in enumerate(events) if (e.seq or 0) > end)
    wanted = _Wanted(agent_name)
    open_ = True
    for event in reversed(events[start:]):
        open_ = wanted.feed(event)
    while open_ and start > 0:
        start -= 1
        open_ = wanted.feed(events[start])
    return start


async def decision_log(
    store: EventStore, session_id: str, *, agent_name: str | None = None,
    app_name: str | None = None, user_id: str | None = None,
) -> tuple[list[Event], int]:
    """The newest part of the session's log that ``pending()`` and the planner decide from
    (oldest first, the compaction events included), and how many events were read. The whole
    log when the session has no compaction. ``app_name``/``user_id`` address the session as the
    store's reads do. Raises SessionNotFoundError (AmbiguousSessionError without them when
    several apps or users hold the id)."""
    history = await store.read_compacted(session_id, app_name=app_name, user_id=user_id)
    rows = history.rows_read
    compaction = history.compaction
    if compaction is None:
        return list(history.events), rows
    record = compaction.actions.compaction
    assert record is not None
    assert compaction.seq is not None
    log = sorted([*history.events, compaction], key=lambda e: e.seq or 0)
    wanted = _Wanted(agent_name)
    open_ = True
    for event in reversed(log):
        open_ = wanted.feed(event)
    older: list[Event] = []
    cursor = log[0].seq - 1 if log[0].seq is not None else 0
    while open_ and cursor > 0:
        page = await store.read(session_id, upto=cursor, backwards=True, limit=_PAGE,
                                app_name=app_name, user_id=user_id)
        rows += len(page)
        for event in page:
            older.append(event)
            open_ = wanted.feed(event)
            if not open_:
                break
        if len(page) < _PAGE or page[-1].seq is None:
            break
        cursor = page[-1].seq - 1
    older.reverse()
    return [*older, *log], rows
