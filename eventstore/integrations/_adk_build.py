"""Building ADK events from stored events without re-validating what the store wrote itself.

ADK's pydantic validation costs ~100-300 µs per event (most of it in google-genai's type
checks), so loading a long session through it would be no faster than ADK's own services.
Events are rebuilt here from the stored JSON mappings (``EventStore.read_mappings``) by trusted
construction — what ``model_construct`` does, without its per-field bookkeeping (``_make``) —
from the native fields, which the store's codec checked when they were written; only what the
extension field holds goes through validation, one small value at a time (a usage-metadata
object, a thought part). An event whose extension patches nested objects is validated whole:
the slow but always-correct path. Both paths give equal events
(``tests/eventstore/test_adk_events.py`` checks it over generated events).
"""

from __future__ import annotations

import functools
import gc
from typing import Any, TypeVar

import orjson
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkActions
from google.adk.tools.tool_confirmation import ToolConfirmation as AdkConfirmation
from google.genai import types
from pydantic import BaseModel, TypeAdapter

from eventstore import (
    ArtifactRef,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)

from ._adk_events import EXTENSION_KEY, apply_patch, event_to_adk_json

__all__ = ["build_adk_events", "event_of_mapping"]

M = TypeVar("M", bound=BaseModel)
Json = dict[str, Any]

_EVENT: TypeAdapter[AdkEvent] = TypeAdapter(AdkEvent)
_PART: TypeAdapter[types.Part] = TypeAdapter(types.Part)
_set = object.__setattr__


@functools.cache
def _template(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """A class's defaults in declaration order (None where a factory makes the default), and
    its factory-made fields."""
    base = {name: info.default if info.default_factory is None else None
            for name, info in cls.model_fields.items()}
    factories = tuple((name, info.default_factory) for name, info in cls.model_fields.items()
                      if info.default_factory is not None)
    return base, factories


def _make(cls: type[M], values: dict[str, Any]) -> M:
    """What ``cls.model_construct(**values)`` builds (no validation), without its per-field
    bookkeeping: fields in declaration order (so dumps keep ADK's key order), defaults from a
    cached template, factories called only for fields not given. For trusted values only;
    ``model_post_init`` is not run (callers pass the id)."""
    base, factories = _template(cls)
    fields = base.copy()
    fields.update(values)  # existing keys keep their place: the declaration order stays
    for name, factory in factories:
        if name not in values:
            fields[name] = factory()
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


@functools.cache
def _field(name: str) -> TypeAdapter[Any] | None:
    info = AdkEvent.model_fields.get(name)
    if info is None or info.annotation is None:
        return None
    return TypeAdapter(info.annotation)


def _native_part(part: Json) -> types.Part | None:
    if part["text"] is not None:
        return _make(types.Part, {"text": part["text"]})
    c = part["function_call"]
    if c is not None:
        call = _make(types.FunctionCall, {"id": c["id"], "name": c["name"], "args": c["args"]})
        return _make(types.Part, {"function_call": call})
    r = part["function_response"]
    if r is not None:
        response = _make(types.FunctionResponse,
                         {"id": r["id"], "name": r["name"], "response": r["response"]})
        return _make(types.Part, {"function_response": response})
    return None  # an artifact reference: only the JSON path gives its ADK form


def _part_json(part: Json) -> Json:
    if part["text"] is not None:
        return {"text": part["text"]}
    if part["function_call"] is not None:
        return {"function_call": part["function_call"]}
    return {"function_response": part["function_response"]}


def _fast(m: Json) -> AdkEvent | None:
    """The ADK event of a stored mapping by trusted construction, or None when only
    validation can build it."""
    metadata: Json = m["custom_metadata"]
    ext = metadata.get(EXTENSION_KEY)
    ext = ext if isinstance(ext, dict) else {}
    if set(ext) - {"event", "parts"}:
        return None
    patch = ext.get("event", {})
    if set(patch) - {"set"}:
        return None
    content = None
    raw_content = m["content"]
    if raw_content is not None:
        natives = iter(raw_content["parts"])
        parts: list[types.Part] = []
        for entry in ext.get("parts", ()):
            if "part" in entry:
                parts.append(_PART.validate_json(orjson.dumps(entry["part"])))
                continue
            native = next(natives)
            if entry.get("patch"):
                raw = apply_patch(_part_json(native), entry["patch"])
                parts.append(_PART.validate_json(orjson.dumps(raw)))
                continue
            built = _native_part(native)
            if built is None:
                return None
            parts.append(built)
        for native in natives:
            built = _native_part(native)
            if built is None:
                return None
            parts.append(built)
        content = _make(types.Content, {"role": raw_content["role"], "parts": parts})
    elif ext.get("parts"):
        return None
    a = m["actions"]
    confirmations = a["requested_tool_confirmations"]
    fields: Json = {
        "id": m["id"],
        "invocation_id": m["invocation_id"],
        "author": m["author"],
        "timestamp": m["timestamp"],
        "content": content,
        "actions": _make(AdkActions, {
            "state_delta": a["state_delta"],
            "artifact_delta": a["artifact_delta"],
            "requested_tool_confirmations": {
                k: _make(AdkConfirmation, c) for k, c in confirmations.items()
            } if confirmations else {},
            "skip_summarization": True if a["skip_summarization"] else None,
            "escalate": True if a["escalate"] else None,
            "transfer_to_agent": a["transfer_to_agent"],
        }),
        "branch": m["branch"],
        "long_running_tool_ids": set(m["long_running_tool_ids"]) or None,
        "turn_complete": True if m["turn_complete"] else None,
        "error_code": m["error_code"],
        "error_message": m["error_message"],
        "custom_metadata": {k: v for k, v in metadata.items() if k != EXTENSION_KEY} or None,
    }
    # Fields every ADK event carries (node_info …) are what their default factories make, so
    # ``_make`` fills them; only the patch's values need validation.
    for key, value in patch.get("set", {}).items():
        adapter = _field(key)
        if adapter is None:
            return None
        fields[key] = adapter.validate_json(orjson.dumps(value))
    return _make(AdkEvent, fields)


def _part_of(raw: Json) -> Part:
    fc, fr, art = raw["function_call"], raw["function_response"], raw["artifact"]
    return Part(
        text=raw["text"],
        function_call=None if fc is None else FunctionCall(**fc),
        function_response=None if fr is None else FunctionResponse(**fr),
        artifact=None if art is None else ArtifactRef(**art),
    )


def event_of_mapping(m: Json) -> Event:
    """The store Event of a stored mapping (``EventStore.read_mappings``), by the public
    constructors."""
    content, a = m["content"], m["actions"]
    return Event(
        author=m["author"], id=m["id"], invocation_id=m["invocation_id"], branch=m["branch"],
        timestamp=m["timestamp"],
        content=None if content is None else Content(
            role=content["role"], parts=tuple(_part_of(p) for p in content["parts"])),
        actions=EventActions(
            state_delta=a["state_delta"], artifact_delta=a["artifact_delta"],
            requested_tool_confirmations={
                k: ToolConfirmation(**v) for k, v in a["requested_tool_confirmations"].items()
            },
            skip_summarization=a["skip_summarization"], escalate=a["escalate"],
            transfer_to_agent=a["transfer_to_agent"],
        ),
        long_running_tool_ids=tuple(m["long_running_tool_ids"]),
        started_call_ids=tuple(m["started_call_ids"]), turn_complete=m["turn_complete"],
        error_code=m["error_code"], error_message=m["error_message"],
        custom_metadata=m["custom_metadata"], seq=m.get("seq"),
    )


def build_adk_events(mappings: list[Json], defaults: Json) -> list[AdkEvent]:
    """ADK events equal to validating ``event_to_adk_json`` of each stored mapping, mostly
    without validation (see the module docstring)."""
    out = []
    # Building allocates many small objects; pausing the cyclic GC meanwhile saves a third.
    enabled = gc.isenabled()
    if enabled and len(mappings) > 256:
        gc.disable()
    try:
        for m in mappings:
            built = _fast(m)
            if built is None:
                raw = event_to_adk_json(event_of_mapping(m), defaults=defaults)
                built = _EVENT.validate_json(orjson.dumps(raw))
            out.append(built)
    finally:
        if enabled:
            gc.enable()
    return out
