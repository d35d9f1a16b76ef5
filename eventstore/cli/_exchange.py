"""The session export format (JSON Lines) and its validation: pure, no I/O.

Line 1 is a header naming the format, its version, and the session's app, user and id; every
further line is one event as the codec encodes it (``encode_event``: the exact stored JSON, without
``seq``, which is the line's position). Import validates every line before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .._codec import SCHEMA_VERSION, decode_event, encode_event
from .._events import Event
from .._exceptions import EventStoreError

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "Export", "dump_header", "parse_export"]

EXPORT_FORMAT = "agent-eventstore/session"
"""The ``format`` value of an export's header line."""

EXPORT_VERSION = 1
"""Version of the export format this code writes and reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Export:
    """A parsed, fully validated export."""

    app_name: str
    """App of the exported session."""
    user_id: str
    """User of the exported session."""
    session_id: str
    """Id of the exported session."""
    events: list[Event]
    """The events, oldest first (``seq`` unset)."""


class ExportFormatError(EventStoreError):
    """An export file is not valid; ``line`` is the 1-based line number."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def dump_header(*, app_name: str, user_id: str, session_id: str, events: int,
                created_at: float) -> bytes:
    """Return the header line (without newline)."""
    return orjson.dumps({
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "created_at": created_at,
        "events": events,
    })


def dump_event(event: Event) -> bytes:
    """Return one event line (without newline): the codec's JSON."""
    return encode_event(event)


def _string(header: dict[str, Any], key: str) -> str:
    value = header.get(key)
    if not isinstance(value, str) or not value:
        raise ExportFormatError(1, f"the header needs a non-empty string {key!r}.")
    return value


def parse_export(lines: Iterable[bytes]) -> Export:
    """Parse and validate a whole export; raise ExportFormatError naming the first bad line."""
    numbered: Sequence[tuple[int, bytes]] = [
        (n, line) for n, line in enumerate(lines, start=1) if line.strip()
    ]
    if not numbered:
        raise ExportFormatError(1, "the file is empty; expected a header line.")
    first, raw_header = numbered[0]
    try:
        header = orjson.loads(raw_header)
    except orjson.JSONDecodeError as exc:
        raise ExportFormatError(first, f"the header is not valid JSON ({exc}).") from exc
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(first, f"not an export: the header's format must be "
                                f"{EXPORT_FORMAT!r}.")
    if header.get("version") != EXPORT_VERSION:
        raise ExportFormatError(first, f"export format version {header.get('version')!r} is "
                                f"not supported (this code reads {EXPORT_VERSION}).")
    schema_version = header.get("schema_version")
    if not isinstance(schema_version, int) or schema_version < 1:
        raise ExportFormatError(first, "the header needs an integer 'schema_version'.")
    app_name = _string(header, "app_name")
    user_id = _string(header, "user_id")
    session_id = _string(header, "session_id")
    events: list[Event] = []
    seen: dict[str, int] = {}
    for number, line in numbered[1:]:
        try:
            event = decode_event(line, schema_version=schema_version)
            encode_event(event)
        except (ValueError, EventStoreError) as exc:
            reason = " ".join(str(exc).split())
            raise ExportFormatError(number, f"not a valid event: {reason}") from exc
        if event.id in seen:
            raise ExportFormatError(number, f"event id {event.id!r} already appears on line "
                                    f"{seen[event.id]}.")
        seen[event.id] = number
        events.append(event)
    declared = header.get("events")
    if isinstance(declared, int) and declared != len(events):
        raise ExportFormatError(numbered[-1][0], f"the header announces {declared} events but "
                                f"the file has {len(events)} (truncated?).")
    return Export(app_name=app_name, user_id=user_id, session_id=session_id, events=events)
