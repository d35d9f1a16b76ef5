"""Building ADK events from stored events without re-validating what the store wrote itself.

ADK's pydantic validation costs ~100-300 µs per event (most of it in google-genai's type
checks), so loading a long session through it would be no faster than ADK's own services.
Events are rebuilt here from the stored JSON mappings (``EventStore.read_mappings``) by trusted
construction — what ``model_construct`` does, without its per-field bookkeeping (``_make``) —
from the native fields, which the store's codec checked when they were written; only what the
extension field holds goes through validation, one small value at a time (a usage-metadata
object, a thought part). An event whose extension patches nested objects is validated whole:
the slow but always-correct path. Both paths give equal events
(``tests/eventstore/integrations/adk/test_adk_events.py`` checks it over generated events).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

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
from eventstore._gcpause import pause as pause_collector
from eventstore._gcpause import resume as resume_collector

from .events import EXTENSION_KEY, apply_patch, event_to_adk_json

__all__ = [
    "build_adk_event_compact",
    "build_adk_events",
    "event_of_mapping",
]

M = TypeVar("M", bound=BaseModel)
Json = dict[str, Any]

_EVENT: TypeAdapter[AdkEvent] = TypeAdapter(AdkEvent)
_PART: TypeAdapter[types.Part] = TypeAdapter(types.Part)
_set = object.__setattr__
_new = object.__new__


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
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS[cls] = _maker(cls)
    return cast(M, make(values))


def _maker(cls: type[M]) -> Callable[[dict[str, Any]], M]:
    """``_make`` of one class, with its template bound (the hot path builds ~5 objects per
    event, so the per-call lookups are worth saving)."""
    base, factories = _template(cls)
    factories = tuple((name, _trusted_factory(factory)) for name, factory in factories)
    new = object.__new__
    copy = base.copy

    def make(values: dict[str, Any]) -> M:
        fields = copy()
        fields.update(values)  # existing keys keep their place: the declaration order stays
        for name, factory in factories:
            if name not in values:
                fields[name] = factory()
        obj = new(cls)
        _set(obj, "__dict__", fields)
        _set(obj, "__pydantic_fields_set__", set(values))
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj

    return make


_MAKERS: dict[type[BaseModel], Callable[[dict[str, Any]], BaseModel]] = {}


def _trusted_factory(factory: Any) -> Callable[[], Any]:
    """``factory``, or for a pydantic model class without validators or ``model_post_init``
    (ADK's ``NodeInfo``, made for every event) its trusted construction: the same defaults
    without ~1 µs of validation."""
    if not (isinstance(factory, type) and issubclass(factory, BaseModel)
            and factory.model_post_init is BaseModel.model_post_init):
        return cast(Callable[[], Any], factory)
    model: type[BaseModel] = factory
    base, nested = _template(model)
    copy = base.copy

    def make() -> BaseModel:
        return _trusted(model, copy(), set())

    # Validators could make defaults other than the declared ones: use the trusted form only
    # where it builds what the class itself builds.
    made, validated = make(), model()
    if nested or made != validated or made.model_dump() != validated.model_dump():
        return cast(Callable[[], Any], factory)
    return make


def _trusted(cls: type[M], fields: dict[str, Any], given: set[str]) -> M:
    """An instance of ``cls`` holding ``fields`` (every field, in declaration order) with
    ``given`` as its set fields, not validated: the end of ``model_construct``."""
    obj = _new(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", given)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


@functools.cache
def _field(name: str) -> TypeAdapter[Any] | None:
    info = AdkEvent.model_fields.get(name)
    if info is None or info.annotation is None:
        return None
    return TypeAdapter(info.annotation)


_make_part = _maker(types.Part)
_make_call = _maker(types.FunctionCall)
_make_response = _maker(types.FunctionResponse)
_make_content = _maker(types.Content)
_make_actions = _maker(AdkActions)
_make_event = _maker(AdkEvent)
_NO_EXTENSION: Json = {}
_ROLE_NAMES = {"u": "user", "m": "model"}


def _native_part(part: Json) -> types.Part | None:
    text = part["text"]
    if text is not None:
        return _make_part({"text": text})
    c = part["function_call"]
    if c is not None:
        call = _make_call({"id": c["id"], "name": c["name"], "args": c["args"]})
        return _make_part({"function_call": call})
    r = part["function_response"]
    if r is not None:
        response = _make_response({"id": r["id"], "name": r["name"], "response": r["response"]})
        return _make_part({"function_response": response})
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
    if metadata:
        ext = metadata.get(EXTENSION_KEY)
        ext = ext if isinstance(ext, dict) else _NO_EXTENSION
        if not ext.keys() <= {"event", "parts"}:
            return None
        patch = ext.get("event", _NO_EXTENSION)
        if not patch.keys() <= {"set"}:
            return None
        custom = {k: v for k, v in metadata.items() if k != EXTENSION_KEY} or None
    else:
        ext = patch = _NO_EXTENSION
        custom = None
    content = None
    raw_content = m["content"]
    if raw_content is not None and not ext:
        parts: list[types.Part] = []
        for native in raw_content["parts"]:
            built = _native_part(native)
            if built is None:
                return None
            parts.append(built)
        content = _make_content({"role": raw_content["role"], "parts": parts})
    elif raw_content is not None:
        natives = iter(raw_content["parts"])
        parts = []
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
        content = _make_content({"role": raw_content["role"], "parts": parts})
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
        "actions": _make_actions({
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
        "custom_metadata": custom,
    }
    # Fields every ADK event carries (node_info …) are what their default factories make, so
    # ``_make`` fills them; only the patch's values need validation.
    if patch:
        for key, value in patch.get("set", {}).items():
            adapter = _field(key)
            if adapter is None:
                return None
            fields[key] = adapter.validate_json(orjson.dumps(value))
    return _make_event(fields)


def _copier(cls: type[BaseModel]) -> Callable[[], dict[str, Any]]:
    """A fresh copy of ``cls``'s defaults, in declaration order (see ``_template``)."""
    return _template(cls)[0].copy


_part_fields = _copier(types.Part)
_call_fields = _copier(types.FunctionCall)
_response_fields = _copier(types.FunctionResponse)
_content_fields = _copier(types.Content)
_actions_fields = _copier(AdkActions)
_event_fields = _copier(AdkEvent)
_node_info = _trusted_factory(AdkEvent.model_fields["node_info"].default_factory)
# The hot path below builds each object's fields in place (one template copy, no mapping of
# the given values first): what ``_make`` gives for the same values, ~30% cheaper.


def _compact_part(raw: Json) -> types.Part | None:
    fields = _part_fields()
    text = raw.get("t")
    if text is not None:
        fields["text"] = text
        return _trusted(types.Part, fields, {"text"})
    c = raw.get("fc")
    if c is not None:
        call = _call_fields()
        call["id"], call["name"], call["args"] = c
        fields["function_call"] = _trusted(types.FunctionCall, call, {"id", "name", "args"})
        return _trusted(types.Part, fields, {"function_call"})
    r = raw.get("fr")
    if r is not None:
        response = _response_fields()
        response["id"], response["name"], response["response"] = r
        fields["function_response"] = _trusted(types.FunctionResponse, response,
                                               {"id", "name", "response"})
        return _trusted(types.Part, fields, {"function_response"})
    return None  # an artifact reference: only the JSON path gives its ADK form


_ACTIONS_GIVEN = frozenset({
    "state_delta", "artifact_delta", "requested_tool_confirmations", "skip_summarization",
    "escalate", "transfer_to_agent",
})
_EVENT_GIVEN = frozenset({
    "id", "invocation_id", "author", "timestamp", "content", "actions", "branch",
    "long_running_tool_ids", "turn_complete", "error_code", "error_message", "custom_metadata",
})


def _compact_actions(a: Json | None) -> AdkActions:
    fields = _actions_fields()
    fields["requested_auth_configs"] = {}
    if a is None:
        fields["state_delta"] = {}
        fields["artifact_delta"] = {}
        fields["requested_tool_confirmations"] = {}
        return _trusted(AdkActions, fields, set(_ACTIONS_GIVEN))
    confirmations = a.get("rc")
    fields["state_delta"] = a.get("sd", {})
    fields["artifact_delta"] = a.get("ad", {})
    fields["requested_tool_confirmations"] = {
        k: _make(AdkConfirmation, {"hint": c.get("h", ""), "confirmed": c.get("c", False),
                                   "payload": c.get("p")})
        for k, c in confirmations.items()
    } if confirmations else {}
    fields["skip_summarization"] = True if a.get("ss") else None
    fields["escalate"] = True if a.get("e") else None
    fields["transfer_to_agent"] = a.get("tr")
    return _trusted(AdkActions, fields, set(_ACTIONS_GIVEN))


def _fast_compact(r: Json) -> AdkEvent | None:
    """``_fast`` of an event in the stored encoding (``read_mappings(compact=True)``), for
    events without an extension (the others are expanded and take ``_fast``); None when only
    validation can build it."""
    fields = _event_fields()
    get = r.get
    raw_content = get("c")
    if raw_content is not None:
        parts = []
        for raw in raw_content["p"]:
            built = _compact_part(raw)
            if built is None:
                return None
            parts.append(built)
        content = _content_fields()
        content["parts"] = parts
        content["role"] = _ROLE_NAMES[raw_content["r"]]
        fields["content"] = _trusted(types.Content, content, {"role", "parts"})
    fields["id"] = r["id"]
    fields["invocation_id"] = r["invocation_id"]
    fields["author"] = r["author"]
    fields["timestamp"] = r["timestamp"]
    fields["actions"] = _compact_actions(get("a"))
    fields["branch"] = get("b")
    lro = get("l")
    fields["long_running_tool_ids"] = set(lro) if lro else None
    fields["turn_complete"] = True if get("t") else None
    fields["error_code"] = get("ec")
    fields["error_message"] = get("em")
    fields["custom_metadata"] = get("m") or None
    fields["node_info"] = _node_info()
    return _trusted(AdkEvent, fields, set(_EVENT_GIVEN))


def _expanded_part(raw: Json) -> Json:
    call, response, ref = raw.get("fc"), raw.get("fr"), raw.get("ar")
    return {
        "text": raw.get("t"),
        "function_call": None if call is None
        else {"id": call[0], "name": call[1], "args": call[2]},
        "function_response": None if response is None
        else {"id": response[0], "name": response[1], "response": response[2]},
        "artifact": None if ref is None
        else {"filename": ref[0], "version": ref[1],
              "mime_type": ref[2] if len(ref) > 2 else "application/octet-stream"},
    }


def _expanded(r: Json) -> Json:
    """The full stored mapping (``read_mappings``) of an event in the stored encoding
    (``docs/protocol.md``, stored encoding)."""
    content, a = r.get("c"), r.get("a") or {}
    return {
        "id": r["id"], "invocation_id": r["invocation_id"], "author": r["author"],
        "branch": r.get("b"), "timestamp": r["timestamp"],
        "content": None if content is None else {
            "role": _ROLE_NAMES[content["r"]],
            "parts": [_expanded_part(p) for p in content["p"]],
        },
        "actions": {
            "state_delta": a.get("sd", {}), "artifact_delta": a.get("ad", {}),
            "requested_tool_confirmations": {
                k: {"hint": v.get("h", ""), "confirmed": v.get("c", False),
                    "payload": v.get("p")}
                for k, v in (a.get("rc") or {}).items()
            },
            "skip_summarization": a.get("ss", False), "escalate": a.get("e", False),
            "transfer_to_agent": a.get("tr"),
        },
        "long_running_tool_ids": r.get("l", []), "started_call_ids": r.get("s", []),
        "partial": False, "turn_complete": r.get("t", False),
        "error_code": r.get("ec"), "error_message": r.get("em"),
        "custom_metadata": r.get("m", {}), "seq": r["seq"],
    }


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


def build_adk_event_compact(r: Json, defaults: Json) -> AdkEvent:
    """The ADK event of one event in the stored encoding (``read_mappings(compact=True)``),
    built without expanding it into the full mapping first when it has no extension."""
    metadata = r.get("m")
    built = None if metadata and EXTENSION_KEY in metadata else _fast_compact(r)
    if built is None:
        built = build_adk_events([_expanded(r)], defaults)[0]
    return built


def build_adk_events(mappings: list[Json], defaults: Json) -> list[AdkEvent]:
    """ADK events equal to validating ``event_to_adk_json`` of each stored mapping, mostly
    without validation (see the module docstring)."""
    out = []
    # Building allocates many small objects the caller keeps (see eventstore._gcpause).
    paused = pause_collector(len(mappings))
    try:
        for m in mappings:
            built = _fast(m)
            if built is None:
                raw = event_to_adk_json(event_of_mapping(m), defaults=defaults)
                built = _EVENT.validate_json(orjson.dumps(raw))
            out.append(built)
    finally:
        resume_collector(paused)
    return out
