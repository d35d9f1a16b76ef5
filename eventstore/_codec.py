"""The codec: events to stored bytes and back, with schema versions and upcasting.

Encoding is deterministic (orjson, sorted keys), so the same event always gives the same bytes and
the database can compare payloads to recognize an idempotent retry. Decoding has two paths: rows the
store wrote itself at the current schema version are rebuilt by trusted construction (no
validation: an order of magnitude faster than pydantic), anything else — an older schema version,
an import — goes through upcasting and full pydantic validation.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import orjson
import pydantic

from ._args import is_utf8, shown
from ._events import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
    Compaction,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)
from ._exceptions import InvalidEventError

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_JSON_DEPTH",
    "SCHEMA_VERSION",
    "EventKind",
    "check_exact_numbers",
    "check_json_value",
    "check_event",
    "decode_event",
    "decode_trusted",
    "encode_event",
    "event_kind",
    "register_upcaster",
    "validate_event_mapping",
    "with_seq",
]

SCHEMA_VERSION = 1
"""Version of the event JSON shape (``encode_event``: exports, recordings, upcasters). Rows the
store writes use the compact stored encoding (``_stored.STORED_SCHEMA_VERSION``); rows of
version 1 hold this event JSON."""

MAX_STATE_VALUE_BYTES = 1 << 20
"""Largest encoded size of one state value (1 MiB); larger values are refused."""


class EventKind:
    """Stable kind names stored next to each event for fast scans (never rename a value)."""

    MESSAGE = "message"
    FUNCTION_CALL = "function_call"
    FUNCTION_RESPONSE = "function_response"
    CONFIRMATION_REQUEST = "confirmation_request"
    CONFIRMATION_ANSWER = "confirmation_answer"
    STATE_DELTA = "state_delta"
    EXECUTION_STARTED = "execution_started"
    COMPACTION = "compaction"

    ALL = frozenset(
        {
            COMPACTION,
            MESSAGE,
            FUNCTION_CALL,
            FUNCTION_RESPONSE,
            CONFIRMATION_REQUEST,
            CONFIRMATION_ANSWER,
            STATE_DELTA,
            EXECUTION_STARTED,
        }
    )


def event_kind(event: Event) -> str:
    """Return the stored kind of ``event``: a pure function of the event, used as a scan hint."""
    if event.started_call_ids:
        return EventKind.EXECUTION_STARTED
    if event.actions.compaction is not None:
        return EventKind.COMPACTION
    content = event.content
    if content is None:
        actions = event.actions
        return (EventKind.STATE_DELTA if actions.state_delta or actions.state_deletions
                else EventKind.MESSAGE)
    # One pass over the parts (every append computes this): calls decide before responses.
    calls = responses = confirm_call = confirm_response = False
    for part in content.parts:
        call, response = part.function_call, part.function_response
        if call is not None:
            calls = True
            confirm_call = confirm_call or call.name == REQUEST_CONFIRMATION_FUNCTION
        if response is not None:
            responses = True
            confirm_response = confirm_response or response.name == REQUEST_CONFIRMATION_FUNCTION
    if calls:
        return EventKind.CONFIRMATION_REQUEST if confirm_call else EventKind.FUNCTION_CALL
    if responses:
        return EventKind.CONFIRMATION_ANSWER if confirm_response else EventKind.FUNCTION_RESPONSE
    return EventKind.MESSAGE


MAX_JSON_DEPTH = 200
"""Deepest nesting of lists and objects in one stored value (a scalar is depth 0). The encoder
refuses payloads nested past ~250 levels and decoders recurse, so deeper values are refused
up front, at every depth, with one typed error."""

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
"""The integers the log carries faithfully (JSON readers turn larger ones into floats)."""


def _short(path: str) -> str:
    return path if len(path) <= 120 else f"{path[:80]}…{path[-30:]}"


def _value_error(event_id: str | None, path: str, problem: str) -> InvalidEventError:
    where = f"Event {event_id!r}: " if event_id is not None else ""
    return InvalidEventError(f"{where}{_short(path)} {problem}", event_id=event_id)


def _check_json_value(value: Any, *, path: str, event_id: str | None) -> None:
    # Iterative, so no value (however deep) can raise RecursionError instead of a typed error.
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if not is_utf8(item):
                raise _value_error(event_id, where, f"is the text {shown(item)}, which holds a "
                                   "lone surrogate: it is not UTF-8 and no backend stores it.")
            continue
        if isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                # shown() describes an int too long to print by its size instead.
                big = item.bit_length() > 1000
                what = shown(item).strip("<>") if big else f"the integer {item}"
                raise _value_error(
                    event_id,
                    where,
                    f"is {what}, outside the 64-bit range JSON readers keep exact; store it as "
                    "a string.",
                )
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _value_error(
                    event_id, where, f"is {item!r}, which JSON cannot represent."
                )
            continue
        if isinstance(item, (Mapping, list)) and depth >= MAX_JSON_DEPTH:
            raise _value_error(
                event_id, where, f"is nested deeper than {MAX_JSON_DEPTH} levels of lists and "
                "objects; the log refuses deeper values."
            )
        if isinstance(item, Mapping):
            for key, child in reversed(list(item.items())):
                if not isinstance(key, str):
                    raise _value_error(event_id, where, f"has a non-string key {shown(key)}.")
                if not is_utf8(key):
                    raise _value_error(event_id, where, f"has the key {shown(key)}, which "
                                       "holds a lone surrogate: it is not UTF-8 and no backend "
                                       "stores it.")
                stack.append((child, f"{where}[{key!r}]", depth + 1))
            continue
        if isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], f"{where}[{index}]", depth + 1))
            continue
        if isinstance(item, (Sequence, AbstractSet)) and not isinstance(item, (bytes, bytearray)):
            # JSON has only lists: a tuple would be stored as one and read back as a list, so the
            # event append() returned would differ from the one read() returns.
            raise _value_error(
                event_id,
                where,
                f"is a {type(item).__name__}; JSON values take lists only — use a list.",
            )
        raise _value_error(
            event_id, where, f"is a {type(item).__name__}, which is not a JSON value."
        )


def check_json_value(value: Any, *, path: str = "value") -> None:
    """Raise ``InvalidEventError`` naming ``path`` unless the log can carry ``value`` exactly.

    Accepted: None, bool, str (UTF-8 text: no lone surrogate), finite floats, integers in the
    signed 64-bit range, lists, and mappings with string keys, nested at most
    ``MAX_JSON_DEPTH`` levels. Never raises RecursionError, however deep the value.
    """
    _check_json_value(value, path=path, event_id=None)


def check_state_delta(event_id: str, delta: Mapping[str, Any]) -> None:
    """Raise InvalidEventError (naming the key) unless every key is a non-empty UTF-8 string
    and every value is JSON.

    Values must be finite JSON (no NaN, no objects, no lone surrogate in a string) and encode
    to at most MAX_STATE_VALUE_BYTES.
    """
    for key, value in delta.items():
        if not isinstance(key, str) or not key:
            raise InvalidEventError(
                f"Event {event_id!r}: state keys must be non-empty strings, not {shown(key)}.",
                event_id=event_id,
            )
        if not is_utf8(key):
            raise InvalidEventError(
                f"Event {event_id!r}: the state key {shown(key)} holds a lone surrogate, which "
                "is not UTF-8 text and no backend stores.", event_id=event_id, key=key)
        try:
            _check_json_value(value, path=f"state_delta[{key!r}]", event_id=event_id)
        except InvalidEventError as exc:
            exc.key = key
            raise
        if value is not None and len(orjson.dumps(value)) > MAX_STATE_VALUE_BYTES:
            raise InvalidEventError(
                f"Event {event_id!r}: the value of state key {key!r} is larger than "
                f"{MAX_STATE_VALUE_BYTES} bytes.",
                event_id=event_id,
                key=key,
            )


def _refuse(event_id: str, path: str, expected: str, value: object) -> InvalidEventError:
    return InvalidEventError(
        f"Event {event_id!r} is malformed: {path} must be {expected}, not {shown(value)}.",
        event_id=event_id,
    )


def _check_str(event_id: str, path: str, value: object, *, optional: bool = False) -> None:
    if not (isinstance(value, str) or (optional and value is None)):
        raise _refuse(event_id, path, "a string" + (" or None" if optional else ""), value)


def _check_bool(event_id: str, path: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _refuse(event_id, path, "a bool", value)


def _check_dict(event_id: str, path: str, value: object) -> None:
    if not isinstance(value, dict):
        raise _refuse(event_id, path, "a dict", value)
    _check_json_value(value, path=path, event_id=event_id)


def _check_part(event_id: str, path: str, part: object) -> None:
    if not isinstance(part, Part):
        raise _refuse(event_id, path, "a Part", part)
    if part.text is not None:
        _check_str(event_id, f"{path}.text", part.text)
    elif part.function_call is not None:
        call = part.function_call
        if not isinstance(call, FunctionCall):
            raise _refuse(event_id, f"{path}.function_call", "a FunctionCall", call)
        _check_str(event_id, f"{path}.function_call.id", call.id)
        _check_str(event_id, f"{path}.function_call.name", call.name)
        _check_dict(event_id, f"{path}.function_call.args", call.args)
    elif part.function_response is not None:
        response = part.function_response
        if not isinstance(response, FunctionResponse):
            raise _refuse(event_id, f"{path}.function_response", "a FunctionResponse", response)
        _check_str(event_id, f"{path}.function_response.id", response.id)
        _check_str(event_id, f"{path}.function_response.name", response.name)
        _check_dict(event_id, f"{path}.function_response.response", response.response)
    else:
        ref = part.artifact
        if not isinstance(ref, ArtifactRef):
            raise _refuse(event_id, f"{path}.artifact", "an ArtifactRef", ref)
        _check_str(event_id, f"{path}.artifact.filename", ref.filename)
        _check_str(event_id, f"{path}.artifact.mime_type", ref.mime_type)
        if not isinstance(ref.version, int) or isinstance(ref.version, bool):
            raise _refuse(event_id, f"{path}.artifact.version", "an int", ref.version)


def _check_content(event_id: str, path: str, content: object) -> None:
    if not isinstance(content, Content):
        raise _refuse(event_id, path, "a Content", content)
    if content.role not in ("user", "model"):
        raise _refuse(event_id, f"{path}.role", "'user' or 'model'", content.role)
    if not isinstance(content.parts, tuple):
        raise _refuse(event_id, f"{path}.parts", "a tuple of Parts", content.parts)
    for index, part in enumerate(content.parts):
        _check_part(event_id, f"{path}.parts[{index}]", part)


def _check_actions(event_id: str, actions: object) -> None:
    if not isinstance(actions, EventActions):
        raise _refuse(event_id, "actions", "an EventActions", actions)
    if not isinstance(actions.state_delta, dict):
        raise _refuse(event_id, "actions.state_delta", "a dict", actions.state_delta)
    check_state_delta(event_id, actions.state_delta)
    _check_deletions(event_id, actions.state_deletions, actions.state_delta)
    if not isinstance(actions.artifact_delta, dict):
        raise _refuse(event_id, "actions.artifact_delta", "a dict", actions.artifact_delta)
    for name, version in actions.artifact_delta.items():
        _check_str(event_id, "actions.artifact_delta key", name)
        if not isinstance(version, int) or isinstance(version, bool):
            raise _refuse(event_id, f"actions.artifact_delta[{name!r}]", "an int", version)
    confirmations = actions.requested_tool_confirmations
    if not isinstance(confirmations, dict):
        raise _refuse(event_id, "actions.requested_tool_confirmations", "a dict", confirmations)
    for call_id, confirmation in confirmations.items():
        path = f"actions.requested_tool_confirmations[{call_id!r}]"
        _check_str(event_id, f"{path} key", call_id)
        if not isinstance(confirmation, ToolConfirmation):
            raise _refuse(event_id, path, "a ToolConfirmation", confirmation)
        _check_str(event_id, f"{path}.hint", confirmation.hint)
        _check_bool(event_id, f"{path}.confirmed", confirmation.confirmed)
        _check_json_value(confirmation.payload, path=f"{path}.payload", event_id=event_id)
    _check_bool(event_id, "actions.skip_summarization", actions.skip_summarization)
    _check_bool(event_id, "actions.escalate", actions.escalate)
    _check_str(event_id, "actions.transfer_to_agent", actions.transfer_to_agent, optional=True)
    if actions.compaction is not None:
        _check_compaction(event_id, actions.compaction)


def _check_compaction(event_id: str, compaction: object) -> None:
    if not isinstance(compaction, Compaction):
        raise _refuse(event_id, "actions.compaction", "a Compaction or None", compaction)
    for name in ("start_seq", "end_seq"):
        value = getattr(compaction, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= INT64_MAX:
            raise _refuse(event_id, f"actions.compaction.{name}", "a positive int", value)
    if compaction.start_seq > compaction.end_seq:
        raise InvalidEventError(
            f"Event {event_id!r}: actions.compaction covers seq {compaction.start_seq} to "
            f"{compaction.end_seq}; start_seq must not be after end_seq.", event_id=event_id)
    _check_content(event_id, "actions.compaction.summary", compaction.summary)


def _check_deletions(event_id: str, deletions: object, delta: Mapping[str, Any]) -> None:
    if not isinstance(deletions, tuple):
        raise _refuse(event_id, "actions.state_deletions", "a tuple of keys", deletions)
    for key in deletions:
        if not isinstance(key, str) or not key:
            raise InvalidEventError(
                f"Event {event_id!r}: state_deletions must hold non-empty string keys, not "
                f"{key!r}.", event_id=event_id,
            )
        if key in delta:
            raise InvalidEventError(
                f"Event {event_id!r} both sets and deletes state key {key!r}; an event does "
                "one or the other.", event_id=event_id, key=key,
            )
    if len(set(deletions)) != len(deletions):
        raise InvalidEventError(
            f"Event {event_id!r} lists a state key twice in state_deletions: "
            f"{sorted(k for k in set(deletions) if deletions.count(k) > 1)!r}.",
            event_id=event_id,
        )


def _check_shape(event: Event) -> None:
    """Raise InvalidEventError unless every field has its declared type and JSON values only.

    orjson would serialize many wrong types without complaint (and NaN as null); this check is
    what guarantees that every stored payload decodes back into an equal event.
    """
    eid = event.id
    _check_str(eid, "invocation_id", event.invocation_id)
    _check_str(eid, "branch", event.branch, optional=True)
    if not isinstance(event.timestamp, (int, float)) or isinstance(event.timestamp, bool) or (
        not math.isfinite(event.timestamp)
    ):
        raise _refuse(eid, "timestamp", "a finite number", event.timestamp)
    if event.content is not None:
        _check_content(eid, "content", event.content)
    _check_actions(eid, event.actions)
    for name in ("long_running_tool_ids", "started_call_ids"):
        ids = getattr(event, name)
        if not isinstance(ids, tuple) or not all(isinstance(i, str) for i in ids):
            raise _refuse(eid, name, "a tuple of strings", ids)
    _check_bool(eid, "turn_complete", event.turn_complete)
    _check_str(eid, "error_code", event.error_code, optional=True)
    _check_str(eid, "error_message", event.error_message, optional=True)
    _check_dict(eid, "custom_metadata", event.custom_metadata)


_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(Event) if f.name != "seq")


def _copier() -> Callable[[Event, int | None], Event]:
    # Straight-line code, one slot after the other: every append returns its events through
    # this, on the event loop's thread. Each slot is set through its own descriptor (what a
    # frozen dataclass's object.__setattr__ ends in, without looking the name up).
    doc = "Return a copy of ``event`` with ``seq`` set (a faster ``dataclasses.replace``)."
    lines = ["def with_seq(event, seq):", f"    {doc!r}", "    clone = new(Event)"]
    lines += [f"    set_{name}(clone, event.{name})" for name in _EVENT_FIELDS]
    lines += ["    set_seq(clone, seq)", "    return clone"]
    namespace: dict[str, Any] = {"new": object.__new__, "Event": Event}
    for name in (*_EVENT_FIELDS, "seq"):
        namespace[f"set_{name}"] = getattr(Event, name).__set__
    exec("\n".join(lines), namespace)  # built from the dataclass's own field names
    copy: Callable[[Event, int | None], Event] = namespace["with_seq"]
    return copy


with_seq = _copier()
"""Return a copy of an event with ``seq`` set (a faster ``dataclasses.replace``)."""


def encode_event(event: Event) -> bytes:
    """Return the event JSON of ``event`` (schema version 1: every field; deterministic bytes;
    ``seq`` is not included) — what exports and recordings hold. The store keeps the compact
    encoding of ``_stored`` instead.

    Raises InvalidEventError when the event holds something JSON cannot represent.
    """
    check_event(event)
    try:
        payload = orjson.dumps(
            with_seq(event, None) if event.seq is not None else event,
            option=orjson.OPT_SORT_KEYS,
        )
    except TypeError as exc:
        raise InvalidEventError(
            f"Event {event.id!r} cannot be encoded as JSON: {exc}", event_id=event.id
        ) from exc
    return payload


def check_event(event: Event) -> None:
    """Raise InvalidEventError unless ``event`` can be stored: an Event, not partial, with a
    non-empty id and author, every field of its declared type and JSON values only."""
    if not isinstance(event, Event):
        raise InvalidEventError(f"Expected an Event, got a {type(event).__name__}.")
    if event.partial:
        raise InvalidEventError(
            f"Event {event.id!r} is partial; partial (streaming) events are not stored.",
            event_id=event.id,
        )
    if not isinstance(event.id, str) or not event.id:
        raise InvalidEventError(f"Event ids must be non-empty strings, not {event.id!r}.")
    if not isinstance(event.author, str) or not event.author:
        raise InvalidEventError(
            f"Event {event.id!r} needs a non-empty author string, not {event.author!r}.",
            event_id=event.id,
        )
    _check_shape(event)


_EVENT_ADAPTER: pydantic.TypeAdapter[Event] = pydantic.TypeAdapter(Event)


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[int, Upcaster] = {}


def register_upcaster(from_version: int, upcaster: Upcaster) -> None:
    """Register a pure function that turns a decoded payload of ``from_version`` into the shape
    of ``from_version + 1``. Upcasters run in a chain before validation when old rows load."""
    if from_version in _UPCASTERS:
        raise ValueError(f"An upcaster from schema version {from_version} is already registered.")
    _UPCASTERS[from_version] = upcaster


def _upcast(mapping: dict[str, Any], version: int) -> dict[str, Any]:
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"schema version {version} is newer than this code understands ({SCHEMA_VERSION})"
        )
    while version < SCHEMA_VERSION:
        upcaster = _UPCASTERS.get(version)
        if upcaster is None:
            raise ValueError(f"no upcaster registered from schema version {version}")
        mapping = upcaster(mapping)
        version += 1
    return mapping


def validate_event_mapping(mapping: Mapping[str, Any], *, seq: int | None = None) -> Event:
    """Validate an untrusted decoded mapping into an Event (raises pydantic.ValidationError)."""
    event = _EVENT_ADAPTER.validate_python(dict(mapping))
    return with_seq(event, seq)


def decode_event(payload: bytes, *, schema_version: int, seq: int | None = None) -> Event:
    """Decode stored bytes of any schema version (upcast, then fully validate).

    Raises ValueError (or orjson.JSONDecodeError / pydantic.ValidationError, both ValueErrors)
    when the bytes are not a valid event; the store turns that into CorruptEventError.
    """
    mapping = orjson.loads(payload)
    if not isinstance(mapping, dict):
        raise ValueError("the payload is not a JSON object")
    check_exact_numbers(payload)
    return validate_event_mapping(_upcast(mapping, schema_version), seq=seq)


# A run of 19+ digits: the only way JSON text can spell an integer outside the signed 64-bit
# range (inside a string or a float too, so a match is only a reason to look closer).
_LONG_DIGITS = re.compile(rb"\d{19,}")


def check_exact_numbers(payload: bytes | str) -> None:
    """Raise ValueError when the JSON text holds an integer outside the signed 64-bit range.

    orjson reads such an integer as a float (``12345678901234567890123`` becomes
    ``1.2345678901234568e+22``): decoding would silently change the value. The log never
    stores one (``check_json_value``), so text that holds one comes from outside (an export,
    a recording) and is refused rather than changed."""
    raw = payload.encode() if isinstance(payload, str) else payload
    if _LONG_DIGITS.search(raw) is None:
        return

    def exact(text: str) -> int:
        value = int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            digits = len(text.lstrip("-"))
            raise ValueError(
                f"it holds the integer {text if digits <= 60 else text[:40] + '…'} "
                f"({digits} digits), outside the 64-bit range the log keeps exact; it would be "
                "read back as a float, so it is refused rather than changed (store it as a "
                "string)"
            )
        return value

    json.loads(raw, parse_int=exact)


def _part(raw: dict[str, Any]) -> Part:
    fc = raw["function_call"]
    fr = raw["function_response"]
    art = raw["artifact"]
    return Part(
        text=raw["text"],
        function_call=None if fc is None else FunctionCall(**fc),
        function_response=None if fr is None else FunctionResponse(**fr),
        artifact=None if art is None else ArtifactRef(**art),
    )


def _content(raw: dict[str, Any]) -> Content:
    return Content(role=raw["role"], parts=tuple(_part(p) for p in raw["parts"]))


def decode_trusted(payload: bytes, *, seq: int) -> Event:
    """Rebuild an event the store itself encoded at the current schema version.

    No validation beyond what construction does; raises KeyError/TypeError/ValueError when the
    bytes are not what encode_event wrote (the store turns that into CorruptEventError).
    """
    raw = orjson.loads(payload)
    content = raw["content"]
    actions = raw["actions"]
    confirmations = actions["requested_tool_confirmations"]
    compaction = actions.get("compaction")
    return Event(
        author=raw["author"],
        id=raw["id"],
        invocation_id=raw["invocation_id"],
        branch=raw["branch"],
        timestamp=raw["timestamp"],
        content=None if content is None else _content(content),
        actions=EventActions(
            state_delta=actions["state_delta"],
            state_deletions=tuple(actions.get("state_deletions", ())),
            artifact_delta=actions["artifact_delta"],
            requested_tool_confirmations={
                k: ToolConfirmation(**v) for k, v in confirmations.items()
            }
            if confirmations
            else {},
            skip_summarization=actions["skip_summarization"],
            escalate=actions["escalate"],
            transfer_to_agent=actions["transfer_to_agent"],
            compaction=None if compaction is None else Compaction(
                start_seq=compaction["start_seq"], end_seq=compaction["end_seq"],
                summary=_content(compaction["summary"])),
        ),
        long_running_tool_ids=tuple(raw["long_running_tool_ids"]),
        started_call_ids=tuple(raw["started_call_ids"]),
        partial=raw["partial"],
        turn_complete=raw["turn_complete"],
        error_code=raw["error_code"],
        error_message=raw["error_message"],
        custom_metadata=raw["custom_metadata"],
        seq=seq,
    )
