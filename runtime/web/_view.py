"""Pure helpers of the web UI: the page of a session's timeline, filters, state diffs.

Nothing here does I/O; ``_app`` reads the rows and hands them over. A page costs what it shows:
pairing looks at the page plus a bounded window around it (``LOOKAROUND`` rows each side), and
a filtered page scans at most ``SCAN_BUDGET`` rows before it stops and offers to go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventstore import CorruptEventError, Event
from eventstore.backends.protocol import StoredEvent
from eventstore.commands import analyze, event_entry, prog
from eventstore.commands._timeline import Timeline, is_error_response

from ..cli._words import function_words

__all__ = [
    "LOOKAROUND",
    "FOLD_BUDGET",
    "SCAN_BUDGET",
    "Filters",
    "Row",
    "decode_rows",
    "expandable",
    "own_changes",
    "page_words",
    "pretty_json",
]

LOOKAROUND = 300
"""Rows read before and after a page to pair its calls with their responses."""

SCAN_BUDGET = 5_000
"""Rows a filtered page reads at most before it stops and links to where it got."""

FOLD_BUDGET = 1_000
"""Events an event's page folds at most (from the nearest state snapshot before it) to show the
state around it; farther from a snapshot it shows the event's own changes and offers the fold."""


def pretty_json(value: Any) -> str:
    """Indented JSON of ``value`` (non-string keys allowed), for display."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def expandable(value: Any, *, limit: int = 120) -> str:
    """The whole of ``value`` as indented JSON when its one-line form (``short_json``) is cut
    at ``limit`` characters, else empty: the page then offers it behind a ``<details>``, so an
    error's cause is never lost to the cut."""
    whole = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return pretty_json(value) if len(whole) > limit else ""


_PAGE_WORDS = {
    "answer_confirmation": "the approve / reject buttons below",
    "submit_response": "the result form below",
}


def page_words(text: str) -> str:
    """Return a pending item's reason (the runtime's words) as the pending page says it where
    a form below answers the item: the buttons or the result form for the functions the page
    does, the ``evs`` command for the one it does not (``rerun_call``: ``evs rerun``)."""
    return function_words(text, lambda name: _PAGE_WORDS.get(name, f"{prog()} rerun"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    """What the timeline is narrowed to; an empty filter keeps every row."""

    kind: str = ""
    """Stored kind name (``model_response``, ``function_response``, …)."""
    author: str = ""
    """Exact author."""
    tool: str = ""
    """A call or response of this tool name."""
    errors: bool = False
    """Only events with an error: an error response or an error code/message."""
    text: str = ""
    """Case-insensitive text anywhere in the stored JSON."""

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.kind or self.author or self.tool or self.errors or self.text)

    def keeps(self, row: StoredEvent, event: Event | None) -> bool:
        """Whether the row passes every filter (an undecodable row passes only the text,
        kind and errors filters: it is an error)."""
        if self.kind and row.kind != self.kind:
            return False
        if self.author and row.author != self.author:
            return False
        if self.text and self.text.lower() not in row.payload.decode("utf-8", "replace").lower():
            return False
        if event is None:
            return not self.tool
        if self.tool and not any(c.name == self.tool for c in event.function_calls()) and not any(
            r.name == self.tool for r in event.function_responses()
        ):
            return False
        return not self.errors or has_error(event)

    def query(self) -> dict[str, str]:
        """The filters as query parameters (only those set)."""
        found = {"kind": self.kind, "author": self.author, "tool": self.tool, "q": self.text,
                 "errors": "1" if self.errors else ""}
        return {k: v for k, v in found.items() if v}


def has_error(event: Event) -> bool:
    """Whether the event carries an error response or an error code/message."""
    if event.error_code or event.error_message:
        return True
    return any(is_error_response(r.response) for r in event.function_responses())


@dataclass(slots=True, kw_only=True)
class Row:
    """One row of the timeline as a page shows it."""

    seq: int
    """Its seq."""
    stored: StoredEvent
    """The stored envelope."""
    event: Event | None
    """The decoded event, or None when the row cannot be decoded."""
    problem: str | None = None
    """Why the row cannot be decoded."""
    entry: dict[str, Any] = field(default_factory=dict)
    """``event_entry`` of the event (calls with their fate, responses with their call)."""
    error: bool = False
    """The event carries an error."""
    findings: list[Any] = field(default_factory=list)
    """What ``verify`` found at this seq."""


def decode_rows(rows: Sequence[StoredEvent], decode: Any) -> list[Row]:
    """Decode each row, keeping the undecodable ones with their problem (never raising)."""
    found: list[Row] = []
    for row in rows:
        try:
            event = decode(row)
        except CorruptEventError as exc:
            found.append(Row(seq=row.seq, stored=row, event=None, problem=str(exc), error=True))
            continue
        found.append(Row(seq=row.seq, stored=row, event=event, error=has_error(event)))
    return found


def pair(rows: list[Row], context: Sequence[Row]) -> Timeline:
    """Pair the calls of ``rows`` with their answers within ``context`` (rows in seq order
    around them, the page included) and fill each row's ``entry``."""
    timeline = analyze(r.event for r in context if r.event is not None)
    for row in rows:
        if row.event is not None:
            row.entry = event_entry(row.event, timeline)
            for call in row.entry["calls"]:
                confirmation = call.get("confirmation")
                if confirmation is not None:
                    confirmation["call_seq"] = _call_seq(timeline,
                                                         confirmation["original_call"])
    return timeline


def _call_seq(timeline: Timeline, original: Any) -> int | None:
    """The seq of the call a confirmation request is about, when the window holds it (the
    row links to it)."""
    call_id = original.get("id") if isinstance(original, Mapping) else None
    record = timeline.calls.get(call_id) if isinstance(call_id, str) else None
    return record.seq if record is not None and not record.is_confirmation else None


def own_changes(event: Event, before: Mapping[str, Any] | None,
                after: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What ``event`` itself changed in the state, by key (sorted): ``{key, change, before,
    after}`` for each key of its ``state_delta`` and ``state_deletions``, ``change`` one of
    ``added``, ``removed``, ``changed``, ``unchanged`` (set to the value it had). With the states
    before and after the event (None when not folded) the values are theirs and a deletion of an
    absent key is left out; without them ``change`` is ``set`` or ``deleted``, ``after`` the
    delta's value and ``before`` unknown (None)."""
    actions = event.actions
    deleted = set(actions.state_deletions)
    changes: list[dict[str, Any]] = []
    for key in sorted(set(actions.state_delta) | deleted):
        if before is None or after is None:
            gone = key in deleted
            changes.append({"key": key, "change": "deleted" if gone else "set", "before": None,
                            "after": None if gone else actions.state_delta[key]})
        elif key not in after:
            if key in before:
                changes.append({"key": key, "change": "removed", "before": before[key],
                                "after": None})
        elif key not in before:
            changes.append({"key": key, "change": "added", "before": None, "after": after[key]})
        else:
            changes.append({"key": key, "before": before[key], "after": after[key],
                            "change": "changed" if before[key] != after[key] else "unchanged"})
    return changes
