"""A session's log as OpenTelemetry span data (GenAI semantic conventions): pure functions.

Nothing here imports opentelemetry; ``_sdk`` turns the ``SpanRecord`` values into SDK spans.
The rules, all functions of the log alone (so a second export is identical):

- An event belongs to its ``invocation_id``; a user event (a message, a confirmation answer,
  a long-running result) belongs to the next invocation after it — when none follows, to the
  invocation it names, and is left out when it names none. One trace per invocation: its root
  span is ``invoke_agent {agent}``, from its first to its last event.
- Every model turn is a ``chat`` span under the root, from the event before it (when that one
  belongs to the same invocation) to the model event; usage tokens, model, response id and
  finish reason come from the event's ``custom_metadata`` as the model adapters record them.
  Runtime-made model-role events (a confirmation request, the display text after
  skip-summarization) are not model turns.
- Every function call is an ``execute_tool {name}`` span under the root of the invocation that
  made it, from the call to its settling response (which may come in a later invocation: a
  confirmation or a long-running result). A ``confirmation_required`` placeholder does not end
  it: it adds an ``evs.confirmation.requested`` span event, the human's answer an
  ``evs.confirmation.answered`` event, each execution claim an ``evs.tool.started`` event.
  An error response sets ``error.type`` to the stored error kind and the span status to error.
  A call with no settling response yet ends at the log's last event with ``evs.tool.open``.
- Ids are hashes: the trace id of (session, invocation id), a span id of (session, seq of the
  event that opens the span, what the span is).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from .._events import REQUEST_CONFIRMATION_FUNCTION, Event

__all__ = [
    "AttributeValue",
    "SpanEvent",
    "SpanRecord",
    "session_spans",
    "span_id_of",
    "trace_id_of",
]

AttributeValue = str | bool | int | float | tuple[str, ...]
"""An attribute value as OpenTelemetry accepts it."""

_PLACEHOLDER_KIND = "confirmation_required"
"""The error kind of a call waiting for a human (the runtime's stored vocabulary)."""

_PROVIDERS = {"gemini": "gcp.gemini"}
"""Our adapters' provider names that the conventions spell differently."""

_USAGE_KEYS = {
    "gen_ai.usage.input_tokens": ("input_tokens", "prompt_tokens", "promptTokenCount",
                                  "prompt_token_count"),
    "gen_ai.usage.output_tokens": ("output_tokens", "completion_tokens", "candidatesTokenCount",
                                   "candidates_token_count"),
}
"""Where each provider's usage mapping keeps the two counts (OpenAI, Anthropic, Gemini, ADK)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    """A timestamped event inside a span."""

    name: str
    """Event name."""
    time_ns: int
    """When it happened, nanoseconds since the epoch."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    """Its attributes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanRecord:
    """One span as the log tells it, ready for the SDK."""

    trace_id: int
    """128-bit trace id (never 0)."""
    span_id: int
    """64-bit span id (never 0)."""
    parent_span_id: int | None
    """The parent span's id, ``None`` for the root of a trace."""
    name: str
    """Span name (``invoke_agent weather_agent``, ``chat``, ``execute_tool get_weather``)."""
    kind: Literal["internal", "client"]
    """Span kind: ``client`` for model calls, ``internal`` otherwise."""
    start_ns: int
    """Start, nanoseconds since the epoch."""
    end_ns: int
    """End, nanoseconds since the epoch (never before the start)."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    """Attributes, in a fixed order."""
    events: tuple[SpanEvent, ...] = ()
    """Span events, in log order."""
    error: str | None = None
    """Status description when the span ended in error; ``None``: status unset."""


def _digest(size: int, *parts: str) -> int:
    value = int.from_bytes(
        hashlib.sha256("\x00".join(parts).encode()).digest()[:size], "big"
    )
    return value or 1


def trace_id_of(session_id: str, invocation_id: str) -> int:
    """Return the trace id of an invocation: a hash of the session and invocation ids."""
    return _digest(16, "evs-trace", session_id, invocation_id)


def span_id_of(session_id: str, seq: int, what: str) -> int:
    """Return the id of the span that the event at ``seq`` opens (``what``: ``invoke_agent``,
    ``chat`` or ``execute_tool:<call id>``)."""
    return _digest(8, "evs-span", session_id, str(seq), what)


def _ns(timestamp: float) -> int:
    return round(timestamp * 1_000_000_000)


def _seq(event: Event) -> int:
    if event.seq is None:
        raise ValueError(f"Event {event.id!r} has no seq: only stored events can be traced.")
    return event.seq


def _owners(events: Sequence[Event]) -> list[str | None]:
    """The invocation each event belongs to (see the module docstring)."""
    owners: list[str | None] = [None] * len(events)
    following: str | None = None
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.author != "user":
            following = event.invocation_id
            owners[index] = following
        else:
            # A user event is input to the invocation after it, even one naming the invocation
            # of the call it answers (``evs confirm``/``respond`` stamp it for frameworks that
            # resume by invocation id): at the end of the log, its own invocation if it names one.
            owners[index] = following if following is not None else (event.invocation_id or None)
    return owners


def _error_of(response: Mapping[str, Any]) -> tuple[str, str] | None:
    """(error.type, message) of an error response, ``None`` for a result."""
    if "error" not in response:
        return None
    error = response["error"]
    if isinstance(error, Mapping):
        kind = error.get("kind")
        message = error.get("message")
        return (kind if isinstance(kind, str) and kind else "_OTHER",
                message if isinstance(message, str) else "")
    return "_OTHER", error if isinstance(error, str) else ""


def _confirmed(response: Mapping[str, Any]) -> bool | None:
    value: Any = response
    if set(response) == {"response"} and isinstance(response["response"], str):
        try:
            value = orjson.loads(response["response"])
        except orjson.JSONDecodeError:
            return None
    confirmed = value.get("confirmed") if isinstance(value, Mapping) else None
    return confirmed if isinstance(confirmed, bool) else None


def _is_model_turn(event: Event, previous: Event | None) -> bool:
    if event.author == "user" or event.content is None or event.content.role != "model":
        return False
    calls = event.function_calls()
    if calls and all(c.name == REQUEST_CONFIRMATION_FUNCTION for c in calls):
        return False
    return not (
        not calls and previous is not None and previous.actions.skip_summarization
        and previous.invocation_id == event.invocation_id and previous.function_responses()
    )


def _chat_attributes(event: Event, session_id: str) -> tuple[str, dict[str, AttributeValue]]:
    metadata = event.custom_metadata
    adk = metadata.get("_adk")
    adk_set = adk.get("event", {}).get("set", {}) if isinstance(adk, Mapping) else {}
    adk_set = adk_set if isinstance(adk_set, Mapping) else {}
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
    provider = metadata.get("provider")
    if isinstance(provider, str) and provider:
        attributes["gen_ai.provider.name"] = _PROVIDERS.get(provider, provider)
    attributes["gen_ai.conversation.id"] = session_id
    model = metadata.get("model", adk_set.get("model_version"))
    if isinstance(model, str) and model:
        attributes["gen_ai.response.model"] = model
    response_id = metadata.get("response_id")
    if isinstance(response_id, str) and response_id:
        attributes["gen_ai.response.id"] = response_id
    finish = metadata.get("finish_reason", adk_set.get("finish_reason"))
    if isinstance(finish, str) and finish:
        attributes["gen_ai.response.finish_reasons"] = (finish,)
    usage = metadata.get("usage", adk_set.get("usage_metadata"))
    if isinstance(usage, Mapping):
        for name, keys in _USAGE_KEYS.items():
            for key in keys:
                count = usage.get(key)
                if isinstance(count, int) and not isinstance(count, bool):
                    attributes[name] = count
                    break
    if event.error_code:
        attributes["error.type"] = event.error_code
    return (f"chat {model}" if isinstance(model, str) and model else "chat"), attributes


@dataclass(kw_only=True)
class _OpenTool:
    """A tool span being built: everything but its end."""

    trace_id: int
    span_id: int
    parent: int
    name: str
    start_ns: int
    attributes: dict[str, AttributeValue]
    events: list[SpanEvent]


def session_spans(events: Sequence[Event], *, session_id: str) -> list[SpanRecord]:
    """Return the spans of a session's stored events (oldest first, as read): per invocation its
    root first, then its chat and tool spans in the order they open.

    Pure and deterministic: the same events give equal spans. Raises ValueError for an event
    without ``seq``."""
    owners = _owners(events)
    confirmation_of: dict[str, str] = {}
    for event in events:
        for call in event.function_calls():
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                original = call.args.get("originalFunctionCall")
                if isinstance(original, Mapping) and isinstance(original.get("id"), str):
                    confirmation_of[call.id] = original["id"]

    roots: dict[str, dict[str, Any]] = {}
    for event, owner in zip(events, owners, strict=True):
        if owner is None:
            continue
        root = roots.get(owner)
        if root is None:
            root = roots[owner] = {"seq": _seq(event), "start": _ns(event.timestamp),
                                   "agent": "", "events": [], "children": []}
        root["end"] = _ns(event.timestamp)
        if not root["agent"] and event.author != "user":
            root["agent"] = event.author

    def root_id(owner: str) -> tuple[int, int]:
        return trace_id_of(session_id, owner), span_id_of(session_id, roots[owner]["seq"],
                                                           "invoke_agent")

    open_tools: dict[str, list[_OpenTool]] = {}
    finished: dict[int, SpanRecord] = {}
    order: list[tuple[str, int]] = []
    previous: Event | None = None
    previous_owner: str | None = None
    last_ns = _ns(events[-1].timestamp) if events else 0
    for event, owner in zip(events, owners, strict=True):
        seq, at = _seq(event), _ns(event.timestamp)
        if owner is not None and _is_model_turn(event, previous):
            trace, parent = root_id(owner)
            name, attributes = _chat_attributes(event, session_id)
            start = _ns(previous.timestamp) if previous is not None and previous_owner == owner \
                else at
            span = span_id_of(session_id, seq, "chat")
            finished[span] = SpanRecord(
                trace_id=trace, span_id=span, parent_span_id=parent, name=name, kind="client",
                start_ns=min(start, at), end_ns=at, attributes=attributes,
                error=(event.error_message or event.error_code) if event.error_code else None)
            order.append((owner, span))
            for call in event.function_calls():
                if call.name == REQUEST_CONFIRMATION_FUNCTION:
                    continue
                span = span_id_of(session_id, seq, f"execute_tool:{call.id}")
                tool_attributes: dict[str, AttributeValue] = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.id,
                    "gen_ai.tool.type": "function",
                    "gen_ai.conversation.id": session_id,
                }
                if call.id in event.long_running_tool_ids:
                    tool_attributes["evs.tool.long_running"] = True
                open_tools.setdefault(call.id, []).append(_OpenTool(
                    trace_id=trace, span_id=span, parent=parent, start_ns=at,
                    name=f"execute_tool {call.name}", attributes=tool_attributes, events=[]))
                order.append((owner, span))
        for call_id in event.started_call_ids:
            for tool in open_tools.get(call_id, [])[:1]:
                tool.events.append(SpanEvent(name="evs.tool.started", time_ns=at, attributes={
                    "evs.invocation.id": event.invocation_id}))
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                original = confirmation_of.get(response.id)
                waiting = open_tools.get(original, []) if original is not None else []
                if waiting:
                    answered: dict[str, AttributeValue] = {"evs.confirmation.id": response.id}
                    confirmed = _confirmed(response.response)
                    if confirmed is not None:
                        answered["evs.confirmation.confirmed"] = confirmed
                    waiting[0].events.append(SpanEvent(name="evs.confirmation.answered",
                                                       time_ns=at, attributes=answered))
                continue
            waiting = open_tools.get(response.id, [])
            if not waiting:
                continue
            tool = waiting[0]
            failure = _error_of(response.response)
            if failure is not None and failure[0] == _PLACEHOLDER_KIND:
                requested: dict[str, AttributeValue] = {}
                asked = event.actions.requested_tool_confirmations.get(response.id)
                if asked is not None and asked.hint:
                    requested["evs.confirmation.hint"] = asked.hint
                tool.events.append(SpanEvent(name="evs.confirmation.requested", time_ns=at,
                                             attributes=requested))
                continue
            waiting.pop(0)
            attributes = dict(tool.attributes)
            if failure is not None:
                attributes["error.type"] = failure[0]
            finished[tool.span_id] = SpanRecord(
                trace_id=tool.trace_id, span_id=tool.span_id, parent_span_id=tool.parent,
                name=tool.name, kind="internal", start_ns=tool.start_ns,
                end_ns=max(at, tool.start_ns), attributes=attributes, events=tuple(tool.events),
                error=(failure[1] or failure[0]) if failure is not None else None)
        previous, previous_owner = event, owner

    for waiting in open_tools.values():
        for tool in waiting:
            finished[tool.span_id] = SpanRecord(
                trace_id=tool.trace_id, span_id=tool.span_id, parent_span_id=tool.parent,
                name=tool.name, kind="internal", start_ns=tool.start_ns,
                end_ns=max(last_ns, tool.start_ns),
                attributes={**tool.attributes, "evs.tool.open": True}, events=tuple(tool.events))

    spans: list[SpanRecord] = []
    for owner, root in roots.items():
        trace, span = root_id(owner)
        root_attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": root["agent"],
            "gen_ai.conversation.id": session_id,
            "evs.invocation.id": owner,
        }
        children = [finished[s] for o, s in order if o == owner]
        for name in _USAGE_KEYS:
            counts = [c.attributes[name] for c in children if name in c.attributes]
            if counts:
                root_attributes[name] = sum(int(c) for c in counts if isinstance(c, int))
        name = f"invoke_agent {root['agent']}" if root["agent"] else "invoke_agent"
        spans.append(SpanRecord(trace_id=trace, span_id=span, parent_span_id=None, name=name,
                                kind="internal", start_ns=root["start"], end_ns=root["end"],
                                attributes=root_attributes))
        spans += children
    return spans
