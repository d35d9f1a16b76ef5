"""Rendering a session's log: a readable rich timeline for humans, mappings for ``--json``.

Calls are shown with what became of them (answered at which seq, pending, in doubt), responses
with the call they answer, confirmation requests with the original call and their answer.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from .._calls import DEFERRAL_KEYS, deferred_call_ids
from .._codec import event_kind
from .._events import REQUEST_CONFIRMATION_FUNCTION, Compaction, Event
from .._links import parent_link
from ._common import printable
from ._records_view import RecordLine, record_kind, record_lines
from ._timeline import CallStatus, Timeline, is_error_response

__all__ = [
    "PROVIDER_CALL_IDS_KEY",
    "STATUS_TEXT",
    "compaction_text",
    "event_entry",
    "print_event",
    "print_events",
    "provider_call_id",
    "record_entries",
    "rerun_decisions",
    "short_json",
]

PROVIDER_CALL_IDS_KEY = "provider_call_ids"
"""``custom_metadata`` key of a model event whose calls the runtime stored under fresh ids
because the model reused ids: ``{stored id: the model's id}`` (``runtime.PROVIDER_CALL_IDS_KEY``,
spelled out here because ``eventstore`` never imports ``runtime``)."""


def provider_call_id(event: Event, call_id: str) -> str | None:
    """The id the model gave the call ``call_id`` of ``event``, when the log stores another."""
    recorded = event.custom_metadata.get(PROVIDER_CALL_IDS_KEY)
    given = recorded.get(call_id) if isinstance(recorded, Mapping) else None
    return given if isinstance(given, str) and given else None


STATUS_TEXT: Mapping[CallStatus, str] = {
    "answered": "answered",
    "awaiting_confirmation": "awaiting confirmation",
    "confirmed_not_run": "confirmed, not run yet: the agent's next run executes it",
    "rejected_not_run": "rejected: the agent's next run answers it with the rejection",
    "superseded": "not run: a newer user message superseded its confirmation",
    "refused": "not run: the answer to its confirmation is refused (see evs pending)",
    "long_running": "pending (long-running: its result is submitted later)",
    "in_doubt": "in doubt (execution started, no response: the process may have crashed)",
    "not_started": "pending (not started)",
}
"""How ``evs show`` and ``evs web`` word each ``CallStatus`` (``Timeline.status``)."""


def short_json(value: Any, *, limit: int = 160) -> str:
    """Return compact JSON for ``value``, cut to ``limit`` characters."""
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rerun_decisions(event: Event) -> list[str]:
    """Return the call ids a human allowed to run again with this event (``evs rerun``: the
    protocol's ``custom_metadata["rerun_call_ids"]``), or an empty list."""
    ids = event.custom_metadata.get("rerun_call_ids") if event.custom_metadata else None
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, str)]


def _call_text(name: str, args: Any) -> str:
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={short_json(v, limit=60)}" for k, v in args.items())
        return f"{name}({inner})"
    return f"{name}({short_json(args, limit=60)})"


def _named_call(call_id: str, timeline: Timeline) -> str:
    """A call an event refers to by id, as ``evs show`` names it (with its position)."""
    record = timeline.calls.get(call_id)
    if record is not None:
        return f"{_call_text(record.call.name, record.call.args)} (call #{record.seq})"
    return "a call not in the log!" if timeline.read_from <= 1 else timeline.unread_call()


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def event_entry(event: Event, timeline: Timeline) -> dict[str, Any]:
    """Return a JSON-ready description of ``event`` with its cross-references resolved."""
    calls: list[dict[str, Any]] = []
    for call in event.function_calls():
        record = timeline.calls.get(call.id)
        entry: dict[str, Any] = {"id": call.id, "name": call.name, "args": call.args}
        given = provider_call_id(event, call.id)
        if given is not None:
            entry["provider_id"] = given
        if record is not None and record.seq == event.seq:
            final = record.final_answer
            entry["status"] = timeline.status(call.id)
            entry["status_text"] = STATUS_TEXT[entry["status"]]
            entry["answered_at"] = final.seq if final else None
            entry["long_running"] = record.long_running or record.deferred
            entry["confirmation_ids"] = list(record.confirmation_ids)
        confirmation = timeline.confirmations.get(call.id)
        if confirmation is not None and confirmation.seq == event.seq:
            entry["confirmation"] = {
                "original_call": confirmation.original,
                "hint": confirmation.hint,
                "payload": confirmation.payload,
                "answered_at": confirmation.answer_seq,
                "confirmed": confirmation.confirmed,
            }
        calls.append(entry)
    responses: list[dict[str, Any]] = []
    for response in event.function_responses():
        record = timeline.calls.get(response.id)
        responses.append({
            "id": response.id,
            "name": response.name,
            "response": response.response,
            "call_seq": record.seq if record else None,
            "error": is_error_response(response.response),
            "requests_confirmation": response.id in event.actions.requested_tool_confirmations,
        })
    actions = event.actions
    return {
        "seq": event.seq,
        "id": event.id,
        "kind": event_kind(event),
        "author": event.author,
        "invocation_id": event.invocation_id,
        "timestamp": event.timestamp,
        "role": event.content.role if event.content else None,
        "text": event.text() or None,
        "calls": calls,
        "responses": responses,
        "started_call_ids": list(event.started_call_ids),
        "rerun_call_ids": rerun_decisions(event),
        "deferred_call_ids": list(deferred_call_ids(event)),
        "record_kind": record_kind(event),
        "records": record_entries(event, timeline),
        "state_delta": actions.state_delta,
        "state_deletions": list(actions.state_deletions),
        "artifact_delta": actions.artifact_delta,
        "artifacts": [
            {"filename": p.artifact.filename, "version": p.artifact.version}
            for p in (event.content.parts if event.content else ())
            if p.artifact is not None
        ],
        "requested_tool_confirmations": {
            k: {"hint": v.hint, "payload": v.payload}
            for k, v in actions.requested_tool_confirmations.items()
        },
        "error_code": event.error_code,
        "error_message": event.error_message,
        "compaction": None if actions.compaction is None else {
            "start_seq": actions.compaction.start_seq, "end_seq": actions.compaction.end_seq,
            "summary": "".join(p.text or "" for p in actions.compaction.summary.parts)},
    }


def compaction_text(compaction: Compaction) -> str:
    """One line saying what a compaction covers (``evs show``, ``evs state``)."""
    return (f"compaction: the summary stands for #{compaction.start_seq}..#"
            f"{compaction.end_seq} in the model's requests (those events are kept)")


def _line(console: Console, *pieces: tuple[str, str], copy: bool = False) -> None:
    """Print one indented line, wrapped at the console's width unless ``copy`` (a command or
    session id meant to be copied: one line, however long)."""
    text = Text("      ")
    for value, style in pieces:
        # Escaped here: Text drops some control characters itself (see ``printable``).
        text.append(printable(value), style=style)
    console.print(text, soft_wrap=copy or None)


def print_event(
    console: Console,
    event: Event,
    timeline: Timeline,
    *,
    confirm_command: str = "evs confirm",
    live: bool = False,
) -> None:
    """Print one event of the timeline (header line, then one line per part or action).

    ``confirm_command`` starts the command printed for an unanswered confirmation
    (``evs confirm [--db URL] SESSION``). ``live`` prints calls without their fate (it is not
    in the log yet; the responses say which call they answer)."""
    reruns = rerun_decisions(event)
    header = Text()
    header.append(f"#{event.seq:<4}", style="bold")
    header.append(f" {_when(event.timestamp)}  ", style="dim")
    header.append(printable(event.author), style="cyan" if event.author == "user"
                  else "magenta")
    deferred = deferred_call_ids(event)
    records = record_lines(event, timeline)
    kind = ("re-run decision" if reruns and not event.text() else "deferral"
            if deferred and event.content is None else record_kind(event) or event_kind(event))
    header.append(f"  {kind.replace('_', ' ')}", style="dim")
    console.print(header)
    for call_id in reruns:
        _line(console, ("↻ ", "bold"), ("re-run allowed: ", "yellow"),
              (_named_call(call_id, timeline), "bold"), (f"  [{call_id}]", "dim"))
    for call_id in deferred:
        _line(console, ("⇥ ", "bold"), ("deferred by its tool, waits for its result: ", "yellow"),
              (_named_call(call_id, timeline), "bold"), (f"  [{call_id}]", "dim"))
    if event.text():
        _line(console, ("“" + event.text() + "”", ""))
    compaction = event.actions.compaction
    if compaction is not None:
        _line(console, ("▤ ", "bold"), (compaction_text(compaction), "bold"))
        summary = "".join(p.text or "" for p in compaction.summary.parts)
        if summary:
            _line(console, ("  summary: ", "dim"), ("“" + summary + "”", ""))
    for call in event.function_calls():
        if call.name == REQUEST_CONFIRMATION_FUNCTION:
            _print_confirmation(console, call.id, timeline, confirm_command, live=live)
            continue
        record = timeline.calls.get(call.id)
        status = timeline.status(call.id) if record and record.seq == event.seq else None
        final = record.final_answer if record else None
        if live:
            tail = ("  long-running" if record and record.long_running else "", "yellow")
        elif status == "answered" and final is not None:
            outcome = "error" if is_error_response(final.response.response) else "answered"
            tail = (f"  {outcome} at #{final.seq}", "red" if outcome == "error" else "green")
        elif status is not None:
            unread = ("" if timeline.read_to is None
                      else f" (no answer up to #{timeline.read_to}; not read further)")
            text = STATUS_TEXT[status]
            if status == "not_started" and record is not None and record.long_running:
                # A framework that records no claim (google-adk without the durability
                # plugin) still marks the call long-running in the model turn.
                text = "pending (long-running; no start recorded)"
            tail = (f"  {text}{unread}", "yellow")
        else:
            tail = ("  (call id used before)", "red")
        given = provider_call_id(event, call.id)
        shown_id = call.id if given is None else f"{call.id}, the model's id {given}"
        _line(console, ("→ ", "bold"), (_call_text(call.name, call.args), "bold"),
              (f"  [{shown_id}]", "dim"), tail)
    if event.started_call_ids:
        _line(console, ("started ", "dim"), (", ".join(event.started_call_ids), "dim"))
    link = parent_link(event)
    if link is not None:
        _line(console, ("↑ ", "bold"), (f"child of session {link[0]}, call {link[1]}", "cyan"))
    asked = event.actions.requested_tool_confirmations
    for response in event.function_responses():
        record = timeline.calls.get(response.id)
        where = f"call #{record.seq}" if record else timeline.unread_call()
        if response.name == REQUEST_CONFIRMATION_FUNCTION:
            confirmation = timeline.confirmations.get(response.id)
            verdict = {True: "approved", False: "rejected", None: "answered"}[
                confirmation.confirmed if confirmation else None
            ]
            _line(console, ("✔ " if verdict == "approved" else "✘ ", "bold"),
                  (f"confirmation {response.id} {verdict}", "bold"),
                  (f"  ({where}) ", "dim"), (short_json(response.response), ""))
            continue
        if response.id in asked:
            style, label = "yellow", "needs confirmation: "
        elif is_error_response(response.response):
            style, label = "red", "error: "
        else:
            style, label = "green", ""
        # A response may not repeat its call's name (OpenAI Agents' function_call_output).
        name = response.name or (record.call.name if record else "?")
        _line(console, ("← ", "bold"), (name, "bold"), (f" [{response.id}]", "dim"),
              (f" ({where}) ", "dim"), (label + short_json(response.response), style))
    for key, value in event.actions.state_delta.items():
        _line(console, ("state ", "blue"), (f"{key} = {short_json(value)}", ""))
    for key in event.actions.state_deletions:
        _line(console, ("state ", "blue"), (f"{key} deleted", ""))
    for filename, version in event.actions.artifact_delta.items():
        _line(console, ("artifact ", "blue"), (f"{filename} v{version} saved", ""))
    for part in event.content.parts if event.content else ():
        if part.artifact is not None:
            _line(console, ("artifact ", "blue"),
                  (f"{part.artifact.filename} v{part.artifact.version} "
                   f"({part.artifact.mime_type}) attached", ""))
    if event.error_code or event.error_message:
        _line(console, ("error ", "red bold"),
              (f"{event.error_code or ''} {event.error_message or ''}".strip(), "red"))
    for flag in ("escalate", "skip_summarization"):
        if getattr(event.actions, flag):
            _line(console, (flag.replace("_", " "), "dim"))
    if event.actions.transfer_to_agent:
        _line(console, (f"transfer to {event.actions.transfer_to_agent}", "dim"))
    for line in records:
        _print_record(console, line)
    if event.content is None and not event.started_call_ids and not records:
        # Runtime bookkeeping without content (a live stream's end, a re-run decision, …).
        # Keys starting with "_" are an integration's own records (ADK's "_adk" extension
        # field), kept for a lossless round trip, not for reading (--json and --raw have them).
        for key, value in event.custom_metadata.items():
            if not key.startswith("_") and key not in DEFERRAL_KEYS:
                _line(console, (f"{key} ", "dim"), (short_json(value), "dim"))


def _print_record(console: Console, record: RecordLine) -> None:
    """One line of a framework door's record (``record_lines``), read as its shape reads."""
    where = f"call #{record.call_seq}" if record.call_seq is not None else "call not read"
    if record.shape == "call":
        _line(console, ("→ ", "bold"), (_call_text(record.name, record.value), "bold"),
              (f"  [{record.call_id}]", "dim"),
              (f"  the framework's copy of {where}" if record.call_seq is not None else "",
               "dim"))
    elif record.shape == "output":
        _line(console, ("← ", "bold"), (record.name or "?", "bold"),
              (f" [{record.call_id}]", "dim"), (f" ({where}) ", "dim"),
              (("retry: " if record.error else "") + (
                  record.value if isinstance(record.value, str) else short_json(record.value)),
               "red" if record.error else "green"))
    elif record.shape == "text":
        _line(console, ("“" + str(record.value) + "”", ""))
    else:
        _line(console, (str(record.value), "dim"))


def record_entries(event: Event, timeline: Timeline) -> list[dict[str, Any]]:
    """``record_lines`` as JSON-ready mappings (``evs show --json``, ``evs web``)."""
    return [{"shape": r.shape, "value": r.value, "name": r.name, "call_id": r.call_id,
             "call_seq": r.call_seq, "error": r.error} for r in record_lines(event, timeline)]


def _print_confirmation(
    console: Console, confirmation_id: str, timeline: Timeline, confirm_command: str, *,
    live: bool = False,
) -> None:
    confirmation = timeline.confirmations[confirmation_id]
    original = confirmation.original
    target = timeline.calls.get(str(original.get("id")))
    where = (f"call #{target.seq}" if target else "call not in the log!"
             if timeline.read_from <= 1 else timeline.unread_call())
    _line(console, ("? ", "yellow bold"), ("confirm ", "yellow bold"),
          (_call_text(str(original.get("name")), original.get("args")), "bold"),
          (f"  [{original.get('id')}, {where}]", "dim"))
    if confirmation.hint:
        _line(console, ("  hint: ", "dim"), (confirmation.hint, ""))
    if confirmation.answer_seq is None and not live:
        _line(console, ("  waiting: ", "yellow"),
              (f"{confirm_command} {confirmation_id} --yes   (or --no)", "bold"), copy=True)
    elif confirmation.answer_seq is not None:
        verdict = {True: "approved", False: "rejected", None: "answered"}[confirmation.confirmed]
        _line(console, (f"  {verdict} at #{confirmation.answer_seq}",
                        "green" if confirmation.confirmed else "red"))


def print_events(
    console: Console,
    events: Iterable[Event],
    timeline: Timeline,
    *,
    confirm_command: str,
    children: Mapping[str, str] | None = None,
) -> None:
    """Print several events of one timeline; ``children`` maps a call id to the child session
    linked to it (an agent run as a tool), printed under the call."""
    for event in events:
        with console:  # one write per event, not one per line
            print_event(console, event, timeline, confirm_command=confirm_command)
            for call in event.function_calls():
                child = (children or {}).get(call.id)
                if child is not None:
                    _line(console, ("  ↓ ", "bold"), (f"child session {child}", "cyan"), copy=True)
