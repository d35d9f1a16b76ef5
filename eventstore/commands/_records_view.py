"""How ``evs show`` and ``evs web`` describe an event that holds only a framework door's
records (``eventstore._framework_records``): as the other doors' events read — a call with its
arguments, an output paired with its call, a message as text, a run's start and end — rather
than the stored record.

- OpenAI Agents session items (``openai_agents``): a ``function_call`` item is the SDK's copy
  of a call the run's model turn mirrored (paired with it when it is in the part read); a
  ``function_call_output`` item is paired with its call; a ``message`` item reads as its text;
  any other item is named by its type.
- OpenAI Agents durable runs (``openai_agents_run``): the run's start (agent, input) and end.
- pydantic-ai messages (``pydantic_ai_message``): a request whose tool returns and retries the
  log already holds as responses names each with its call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from .._events import Event
from .._framework_records import (
    OPENAI_AGENTS_ITEM_KEY,
    OPENAI_AGENTS_RUN_KEY,
    PYDANTIC_AI_MESSAGE_KEY,
    is_framework_record,
)
from ._timeline import CallRecord, Timeline

__all__ = ["RecordLine", "record_kind", "record_lines"]

@dataclass(frozen=True, slots=True)
class RecordLine:
    """One line describing a record."""

    shape: Literal["call", "output", "text", "note"]
    """What it reads as: a call, an output (a call's result), a message, a note."""
    value: Any
    """A call's arguments, an output's value, a message's or a note's text."""
    name: str = ""
    """The tool, for a call or an output."""
    call_id: str = ""
    """The call's id as the framework gave it, for a call or an output."""
    call_seq: int | None = None
    """Where the call the line is about stands in the log, when it is in the part read."""
    error: bool = False
    """An output that is an error (a retry prompt)."""


def record_kind(event: Event) -> str | None:
    """The kind ``evs show`` names such an event by (``None``: not only door records)."""
    if not is_framework_record(event):
        return None
    meta = event.custom_metadata
    if OPENAI_AGENTS_ITEM_KEY in meta:
        return "session item"
    if PYDANTIC_AI_MESSAGE_KEY in meta:
        return "pydantic-ai request"
    return "run record"


def record_lines(event: Event, timeline: Timeline) -> list[RecordLine]:
    """The lines describing ``event``'s door records (empty when it holds anything else)."""
    if not is_framework_record(event):
        return []
    meta = event.custom_metadata
    lines: list[RecordLine] = []
    item = meta.get(OPENAI_AGENTS_ITEM_KEY)
    if isinstance(item, Mapping) and isinstance(item.get("item"), Mapping):
        lines.extend(_item_lines(item["item"], event, timeline))
    run = meta.get(OPENAI_AGENTS_RUN_KEY)
    if isinstance(run, Mapping):
        lines.extend(_run_lines(run))
    message = meta.get(PYDANTIC_AI_MESSAGE_KEY)
    if isinstance(message, Mapping):
        lines.extend(_message_lines(message, timeline))
    return lines


def _mirrored(timeline: Timeline, call_id: str, before: int) -> CallRecord | None:
    """The newest call before ``before`` that mirrors the SDK's call ``call_id`` (stored as
    ``call_id@event id``, or as ``call_id`` itself)."""
    found = [r for r in timeline.mirrors.get(call_id, ()) if r.seq < before]
    if found:
        return found[-1]
    record = timeline.calls.get(call_id)
    return record if record is not None and record.seq < before else None


def _item_lines(item: Mapping[str, Any], event: Event, timeline: Timeline) -> Iterator[RecordLine]:
    kind = item.get("type")
    call_id = item.get("call_id")
    seq = event.seq or 0
    if kind == "function_call" and isinstance(call_id, str):
        name = str(item.get("name", ""))
        raw = item.get("arguments")
        try:
            args: Any = orjson.loads(raw) if isinstance(raw, str) else raw
        except orjson.JSONDecodeError:
            args = raw
        record = _mirrored(timeline, call_id, seq)
        yield RecordLine("call", args, name=name, call_id=call_id,
                         call_seq=record.seq if record else None)
    elif kind == "function_call_output" and isinstance(call_id, str):
        record = _mirrored(timeline, call_id, seq)
        yield RecordLine("output", item.get("output"), call_id=call_id,
                         name=record.call.name if record else "",
                         call_seq=record.seq if record else None)
    elif kind in (None, "message") and isinstance(item.get("role"), str):
        text = _text(item.get("content"))
        yield RecordLine("text", text) if text else RecordLine(
            "note", f"{item['role']} message without text")
    else:
        yield RecordLine("note", f"session item: {kind or 'untyped'}")


def _run_lines(run: Mapping[str, Any]) -> Iterator[RecordLine]:
    name = str(run.get("run", "?"))
    start = run.get("start")
    if isinstance(start, Mapping):
        given = start.get("input")
        said = f", input “{given}”" if isinstance(given, str) and given else ""
        yield RecordLine("note", f"run {name} started: agent {start.get('agent', '?')}{said}")
    if "end" in run:
        yield RecordLine("note", f"run {name} ended: {run['end']}")


def _message_lines(message: Mapping[str, Any], timeline: Timeline) -> Iterator[RecordLine]:
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, Mapping):
            continue
        kind, call_id = part.get("part_kind"), part.get("tool_call_id")
        if kind in ("tool-return", "retry-prompt") and isinstance(call_id, str):
            record = timeline.calls.get(call_id)
            yield RecordLine("output", part.get("content"), call_id=call_id,
                             name=str(part.get("tool_name") or ""), error=kind == "retry-prompt",
                             call_seq=record.seq if record else None)
        elif isinstance(kind, str):
            yield RecordLine("note", f"pydantic-ai {kind} part")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""
