"""The paged reading behind ``evs show``: the rows it prints, a page at a time, each page checked
and paired with what it needs around it, so that showing costs what is printed.

``evs show`` prints a window of the log that always ends at the log's end: everything, from
``--since SEQ``, or the newest ``--last N``. The window is read a page at a time (``--last N``
for a small N in one backwards read) and each page is printed before the next is read, so
memory stays flat in the log's length and a pager that quits stops the reading.

What is checked, and so what a clean page promises (``ShowReading.scope`` says it in the
output):

- the chain of the rows shown: each links to the one before it, the first to the stored hash
  of the row before the window (taken on trust: the rows before the window are not checked;
  ``evs verify`` checks the whole log), the last to the session's head record; with a key each
  row's signature and the head's;
- what ``evs verify`` checks of each row shown (gaps, order, ids, kind, decoding, the
  ``shared_state`` flag, the artifact versions it names);
- the pairing of calls with their answers and confirmations, looked up to ``LOOK_AROUND``
  events before and after each page: a call or an answer further away is printed as not read,
  never as missing, and a reply whose call was not read is not called an orphan.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final

from eventstore.backends.protocol import SessionRecord, StoredEvent
from eventstore.store.facade import EventStore, SessionInfo

from .._calls import deferred_call_ids
from .._chain import GENESIS
from .._chain_check import CHAIN_CODES
from .._events import REQUEST_CONFIRMATION_FUNCTION, Event
from .._exceptions import CorruptEventError, SessionNotFoundError
from .._fork import SessionForks
from .._links import child_session_id, parent_link
from ._render import rerun_decisions
from ._timeline import Timeline, analyze
from ._verify import Finding, check_artifacts, check_events, check_rows

__all__ = ["LOOK_AROUND", "SHOW_PAGE", "ShowReading", "ShownPage", "decode_rows",
           "linked_children", "open_show"]

SHOW_PAGE: Final = 200
"""Rows read and printed per step."""

LOOK_AROUND: Final = 2_000
"""Rows read at most before and after a page to find the calls its answers belong to and the
answers of its calls."""

_UNKNOWABLE_IN_PART: Final = ("response_without_call", "confirmation_unknown_call")
"""Findings that say "no earlier event", which only a reading from seq 1 can know."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownPage:
    """One page of ``evs show``: its rows and what is needed to print them."""

    rows: list[StoredEvent]
    """The rows, as stored (damaged ones included)."""
    decoded: dict[int, Event]
    """``id(row)`` -> its event, for the rows that decode."""
    timeline: Timeline
    """Calls paired with answers over the page and the events read around it."""
    findings: list[Finding]
    """What ``evs verify`` would find about these rows (and seqs between them no row holds);
    findings about the session as a whole come first in ``ShowReading.findings``."""
    children: dict[str, str]
    """Call id -> the child session linked to that call, for the page's calls."""


async def linked_children(store: EventStore, session_id: str,
                          events: Sequence[Event]) -> dict[str, str]:
    """Call id -> the child session linked to it (an agent run as a tool), for the calls of
    ``events``: the runtime names a child by ``child_session_id``, and a candidate counts only
    when its first events link back to this session and call."""
    found: dict[str, str] = {}
    for event in events:
        for call in event.function_calls():
            candidate = child_session_id(session_id, call.id)
            try:
                first = await store.read(candidate, limit=4)
            except SessionNotFoundError:
                continue
            if any(parent_link(e) == (session_id, call.id) for e in first):
                found[call.id] = candidate
    return found


def decode_rows(store: EventStore,
                rows: Sequence[StoredEvent]) -> list[tuple[StoredEvent, Event]]:
    """Each row that decodes with its event (the others are findings of their own)."""
    found: list[tuple[StoredEvent, Event]] = []
    for row in rows:
        try:
            found.append((row, store.decode(row)))
        except CorruptEventError:
            continue
    return found


def _wanted_calls(events: Sequence[Event]) -> set[str]:
    """The call ids ``events`` refer to (answers, confirmations' original calls, re-runs)."""
    wanted: set[str] = set()
    for event in events:
        wanted.update(r.id for r in event.function_responses())
        wanted.update(rerun_decisions(event))
        wanted.update(deferred_call_ids(event))
        for call in event.function_calls():
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                original = call.args.get("originalFunctionCall")
                if isinstance(original, dict):
                    wanted.add(str(original.get("id")))
    return wanted


def _made_calls(events: Sequence[Event]) -> set[str]:
    return {call.id for event in events for call in event.function_calls()}


def _open_calls(timeline: Timeline, page: Sequence[Event]) -> bool:
    """Whether a call of ``page`` has no final answer in ``timeline`` yet."""
    seqs = {e.seq for e in page}
    return any(r.seq in seqs for r in timeline.open_calls())


class ShowReading:
    """One ``evs show`` window of a session, read page by page (see the module docstring).

    Built by ``open_show``; ``pages()`` reads it once."""

    def __init__(self, store: EventStore, info: SessionInfo, *, head: SessionRecord | None,
                 forks: SessionForks, newest: int, artifacts: dict[str, list[int]],
                 parent: tuple[str, str] | None, first: int, last: int | None,
                 page_size: int, look_around: int, key: str | None = None) -> None:
        self._store = store
        self._key = info.id if key is None else key
        """The key the session is stored under (``EventStore.session_key``)."""
        self.info = info
        """The session."""
        self.forks = forks
        """Where the session was forked from, and the forks made of it."""
        self.parent = parent
        """The parent session and call when this session is a child agent's."""
        self._head = head
        self._artifacts = artifacts
        self._first = first
        self._last = last
        self._page = page_size
        self._around = look_around
        self.findings: list[Finding] = []
        """Findings about the session as a whole (known before the first page)."""
        if newest != info.version:
            self.findings.append(Finding(
                session_id=info.id, seq=None, code="version_mismatch",
                message=f"the session's version is {info.version} but its newest event has "
                f"seq {newest}."))

    @property
    def start(self) -> int:
        """The first seq of the window (1 when the whole log is shown)."""
        if self._last is not None and self._last < self.info.version:
            return max(self._first, self.info.version - self._last + 1)
        return self._first

    def scope(self) -> str:
        """What this reading checks, in one sentence (printed under the session header)."""
        start, end = self.start, self.info.version
        if self._last == 0 or start > end:
            return "Nothing shown, nothing checked; evs verify checks the whole log."
        signed = " and signatures" if self._store.backend.signing_key is not None else ""
        whole = "the whole log" if start == 1 else f"seq {start}..{end}"
        before = ("" if start == 1 else f", from the stored hash of seq {start - 1} on (seq "
                  f"1..{start - 1} not checked here: evs verify checks the whole log)")
        return (f"Checked here: the chain{signed} of {whole} up to the head record{before}; "
                f"calls paired with answers up to {self._around} events around each page.")

    async def _read(self, *, after: int | None, upto: int | None, backwards: bool,
                    limit: int) -> list[StoredEvent]:
        return await self._store.backend.read(self._key, after=after, upto=upto,
                                              backwards=backwards, limit=limit)

    async def _window_pages(self) -> AsyncIterator[list[StoredEvent]]:
        """The window's rows, a page at a time, in log order."""
        if self._last == 0:
            return
        after = self.start - 1
        if self._last is not None and self._last <= self._page:
            rows = await self._read(after=after, upto=None, backwards=True, limit=self._last)
            rows.reverse()
            if rows:
                yield rows
            return
        while True:
            rows = await self._read(after=after, upto=None, backwards=False, limit=self._page)
            if not rows:
                return
            yield rows
            if len(rows) < self._page:
                return
            after = rows[-1].seq  # read order: the hidden key, which edits of seq leave

    async def _look_back(self, before: int, wanted: set[str]) -> list[StoredEvent]:
        """Rows before seq ``before``, newest first in pages, until every wanted call is found
        or ``LOOK_AROUND`` rows were read; returned in log order."""
        found: list[StoredEvent] = []
        upto = before - 1
        while wanted and upto >= 1 and len(found) < self._around:
            limit = min(self._page, self._around - len(found))
            rows = await self._read(after=None, upto=upto, backwards=True, limit=limit)
            if not rows:
                break
            found += rows
            wanted -= _made_calls([e for _, e in decode_rows(self._store, rows)])
            upto = rows[-1].seq - 1
        found.reverse()
        return found

    async def _look_ahead(self, after: int, known: list[Event],
                          page: list[Event]) -> list[StoredEvent]:
        """Rows after seq ``after`` in pages until every call of ``page`` is answered (in
        ``known`` and what is read) or ``LOOK_AROUND`` rows were read."""
        found: list[StoredEvent] = []
        events = list(known)
        while len(found) < self._around and _open_calls(analyze(events), page):
            limit = min(self._page, self._around - len(found))
            rows = await self._read(after=after, upto=None, backwards=False, limit=limit)
            if not rows:
                break
            found += rows
            events += [e for _, e in decode_rows(self._store, rows)]
            after = rows[-1].seq  # read order: the hidden key, which edits of seq leave
        return found

    async def _predecessor(self, seq: int) -> bytes:
        """The stored chain hash the row at ``seq`` should link to (that of the row before
        it; an empty hash, which nothing links to, when that row is missing or has none)."""
        if seq <= 1:
            return GENESIS
        rows = await self._read(after=None, upto=seq - 1, backwards=True, limit=1)
        if not rows or rows[0].seq != seq - 1:
            return b""
        return rows[0].chain_hash or b""

    async def pages(self) -> AsyncIterator[ShownPage]:
        """Read, check and pair the window a page at a time (see the module docstring)."""
        store, sid = self._store, self._key
        key = store.backend.signing_key
        copied = self.forks.origin.origin_seq if self.forks.origin else 0
        pages = self._window_pages()
        current = await anext(pages, None)
        if current is None:
            return
        prev = await self._predecessor(min(r.seq for r in current))
        previous_events: list[Event] = []
        carried: list[Finding] = []
        reported: set[tuple[int | None, str]] = set()
        while current is not None:
            following = await anext(pages, None)
            first = min(r.seq for r in current)
            last_row = max(current, key=lambda r: r.seq)
            findings, _ = check_rows(
                sid, current, version=None, decode=store.decode, signing_key=key,
                copied_through=copied, first_seq=first, prev=prev,
                head=self._head if following is None else None,
                following=min(following, key=lambda r: r.seq) if following else None)
            decoded = decode_rows(store, current)
            events = [e for _, e in decoded]
            after_events = [e for _, e in decode_rows(store, following or [])]
            wanted = _wanted_calls(events) - _made_calls(previous_events + events)
            context_start = min([e.seq or first for e in previous_events] + [first])
            back = await self._look_back(context_start, wanted)
            back_events = [e for _, e in decode_rows(store, back)]
            end = max(r.seq for r in (following or current))
            ahead = await self._look_ahead(end, previous_events + events + after_events,
                                           events)
            ahead_events = [e for _, e in decode_rows(store, ahead)]
            context = back_events + previous_events + events + after_events + ahead_events
            timeline = analyze(context)
            timeline.read_from = min([r.seq for r in back] + [context_start])
            newest = max([r.seq for r in ahead] + [end])
            timeline.read_to = None if newest >= self.info.version else newest
            seqs = {r.seq for r in current}
            findings += [
                f for f in check_events(sid, context)
                if f.seq in seqs and not (timeline.read_from > 1
                                          and f.code in _UNKNOWABLE_IN_PART)
            ]
            findings += check_artifacts(sid, events, self._artifacts)
            top = last_row.seq
            mine = [f for f in carried + findings if f.seq is None or f.seq <= top
                    or following is None]
            carried = [f for f in carried + findings if f not in mine]
            fresh = []
            for finding in mine:
                # A break at a page's edge is seen from both pages: reported once.
                said = (finding.seq, "chain" if finding.code in CHAIN_CODES else finding.code)
                if said not in reported:
                    reported.add(said)
                    fresh.append(finding)
            yield ShownPage(rows=current, decoded={id(r): e for r, e in decoded},
                            timeline=timeline, findings=fresh,
                            children=await linked_children(store, self.info.id, events))
            prev = last_row.chain_hash or b""
            previous_events = events
            current = following


async def open_show(store: EventStore, session_id: str, *, since: int | None,
                    last: int | None, page_size: int = SHOW_PAGE,
                    look_around: int = LOOK_AROUND, app_name: str | None = None,
                    user_id: str | None = None) -> ShowReading:
    """Prepare the ``evs show`` reading of ``session_id`` from seq ``since`` (default 1),
    only the newest ``last`` rows when given. Reads the session's record, fork links, artifact
    list, newest row and first events (for a parent link), not its log. Raises
    SessionNotFoundError (AmbiguousSessionError: ``app_name``/``user_id`` pick)."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    where = {"app_name": info.app_name, "user_id": info.user_id}
    key = await store.session_key(session_id, **where)
    newest = await store.backend.read(key, after=None, upto=None, backwards=True,
                                      limit=1)
    first_events = await store.backend.read(key, after=None, upto=None,
                                            backwards=False, limit=4)
    parent = next((link for _, e in decode_rows(store, first_events)
                   if (link := parent_link(e)) is not None), None)
    return ShowReading(
        store, info, head=await store.backend.get_session(key),
        forks=await store.fork_links(session_id, **where),
        newest=newest[0].seq if newest else 0,
        artifacts=await store.list_artifacts(session_id, **where), parent=parent,
        first=since or 1, last=last, page_size=page_size, look_around=look_around, key=key)
