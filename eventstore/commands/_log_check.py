"""The checks across a whole log that ``evs verify`` and ``evs import`` make page by page, in
memory that does not grow with the log.

What a check across pages needs of each event — the place each event id first appeared, and of
each call its seq, name, arguments and first two final answers — lives in a temporary file
(``backends.sqlite.scratch.ScratchIndex``, its memory capped at ``CACHE_KIB``; the file is
deleted when the check closes), looked up a page at a time. The findings are those of
``check_events`` on the whole log, in the same order, with the same messages (``_verify``'s
message functions).

Blocking (a file): call it off the event loop.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._events import REQUEST_CONFIRMATION_FUNCTION, Event
from ..backends.sqlite.scratch import CACHE_KIB, ScratchIndex
from ._verify import (
    Finding,
    answered_twice_message,
    confirmation_mismatch_message,
    confirmation_unknown_message,
    duplicate_call_message,
    orphan_message,
)

__all__ = ["CACHE_KIB", "LogCheck"]

@dataclass(slots=True)
class _Call:
    """A call as the checks across pages need it (the first call with its id)."""

    n: int
    """Its place among the log's calls (the order ``check_events`` reports in)."""
    seq: int
    name: str
    long_running: bool
    final1: int | None
    """Seq of its first final answer."""
    final2: int | None
    """Seq of its second final answer."""
    args: dict[str, Any] | None = None
    """Its arguments when at hand (a call of the current page), else read when needed."""
    stored: bool = True
    changed: bool = False


class LogCheck:
    """``check_events`` over a log fed a page at a time (``first_places``, ``add``), with what
    it keeps of earlier pages in a temporary file, not in memory."""

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._index = ScratchIndex()
        self._count = 0
        self._orphans: list[Finding] = []
        self._duplicates: list[Finding] = []
        self._answered: list[tuple[int, Finding]] = []
        self._confirmations: list[Finding] = []

    def close(self) -> None:
        """Delete the scratch file (the check cannot be fed afterwards)."""
        self._index.close()

    def __enter__(self) -> LogCheck:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def first_places(self, ids: Sequence[tuple[str, int]]) -> dict[str, int]:
        """For the ``(event id, place)`` pairs of one page, in log order: each id's first
        place (its own unless an earlier page or an earlier pair had the id), and record them.
        A place is whatever the caller counts in (a seq, a line number)."""
        places = self._index.places({i for i, _ in ids})
        new: list[tuple[str, int]] = []
        for event_id, place in ids:
            if event_id not in places:
                places[event_id] = place
                new.append((event_id, place))
        self._index.add_places(new)
        return places

    def add(self, events: Sequence[Event]) -> None:
        """Feed the next page of the log's decoded events (oldest first, ``seq`` set): pair
        its calls with their answers and confirmations, as ``analyze`` does."""
        wanted: set[str] = set()
        for event in events:
            for call in event.function_calls():
                wanted.add(call.id)
                if call.name == REQUEST_CONFIRMATION_FUNCTION:
                    original = call.args.get("originalFunctionCall")
                    if isinstance(original, Mapping):
                        wanted.add(str(original.get("id")))
            wanted.update(r.id for r in event.function_responses())
        known: dict[str, _Call] = {
            call_id: _Call(n=n, seq=seq, name=name, long_running=long, final1=f1, final2=f2)
            for call_id, n, seq, name, long, f1, f2 in self._index.calls(wanted)
        }
        for event in events:
            self._add_event(event, known)
        self._store(known)

    def _add_event(self, event: Event, known: dict[str, _Call]) -> None:
        sid, seq = self._session_id, event.seq or 0
        for call in event.function_calls():
            first = known.get(call.id)
            if first is not None:
                self._duplicates.append(Finding(session_id=sid, seq=seq,
                                                code="duplicate_call_id",
                                                message=duplicate_call_message(call, first.seq)))
                continue
            known[call.id] = _Call(n=self._count, seq=seq, name=call.name,
                                   long_running=call.id in event.long_running_tool_ids,
                                   final1=None, final2=None, args=call.args, stored=False)
            self._count += 1
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                self._confirmation(call.id, call.args, seq, known)
        asked = event.actions.requested_tool_confirmations
        for response in event.function_responses():
            record = known.get(response.id)
            if record is None:
                self._orphans.append(Finding(session_id=sid, seq=seq,
                                             code="response_without_call",
                                             message=orphan_message(response)))
                continue
            if response.id in asked:
                continue  # a confirmation placeholder, not the result
            if record.final1 is None:
                record.final1, record.changed = seq, True
            elif record.final2 is None:
                record.final2, record.changed = seq, True
                if not record.long_running:
                    self._answered.append((record.n, Finding(
                        session_id=sid, seq=seq, code="answered_twice",
                        message=answered_twice_message(response.id, record.name, record.seq,
                                                       record.final1, seq))))

    def _confirmation(self, confirmation_id: str, args: Mapping[str, Any], seq: int,
                      known: dict[str, _Call]) -> None:
        """Judge a confirmation request when it is made: the call it names is the first with
        that id, and only one made before it can match (as ``check_events`` judges it)."""
        raw = args.get("originalFunctionCall")
        original = dict(raw) if isinstance(raw, Mapping) else {}
        target = known.get(str(original.get("id")))
        sid = self._session_id
        if target is None or target.seq >= seq:
            self._confirmations.append(Finding(
                session_id=sid, seq=seq, code="confirmation_unknown_call",
                message=confirmation_unknown_message(confirmation_id, original)))
            return
        if target.args is None:
            target.args = pickle.loads(self._index.args(target.n))
        if target.name != original.get("name") or target.args != original.get("args"):
            self._confirmations.append(Finding(
                session_id=sid, seq=seq, code="confirmation_call_mismatch",
                message=confirmation_mismatch_message(
                    confirmation_id, original, str(original.get("id")), target.name,
                    target.args, target.seq)))

    def _store(self, known: dict[str, _Call]) -> None:
        new = [(i, c) for i, c in known.items() if not c.stored]
        # Pickle, not JSON: the arguments come back as the same Python values, so comparing
        # them with a confirmation's record is the comparison of the events themselves (the
        # index holds only what this process wrote).
        self._index.add_calls(
            [(i, c.n, c.seq, c.name, c.long_running, c.final1, c.final2) for i, c in new],
            [(c.n, pickle.dumps(c.args, protocol=pickle.HIGHEST_PROTOCOL)) for _, c in new])
        self._index.set_finals(
            [(c.final1, c.final2, i) for i, c in known.items() if c.stored and c.changed])

    def findings(self) -> list[Finding]:
        """What ``check_events`` finds in the whole log fed so far, in its order."""
        answered = [f for _, f in sorted(self._answered, key=lambda a: a[0])]
        return self._orphans + self._duplicates + answered + self._confirmations
