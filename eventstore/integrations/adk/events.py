"""ADK events to store events and back, losslessly: pure functions over ADK's JSON form.

An ADK ``Event`` is read as the JSON object ADK itself stores (``model_dump_json(exclude_none=
True)``). Everything our event model has a field for is stored natively — id, invocation id,
author, branch, timestamp, text / function-call / function-response parts, state and artifact
deltas, confirmations requested, skip-summarization, escalate, transfer, long-running call ids,
turn-complete, error code and message, custom metadata — so ``evs show``, ``evs pending``,
``verify`` and the replay processors read ADK-written histories like any other.

The rest lives in the **extension field** ``custom_metadata["_adk"]`` (``EXTENSION_KEY``), a JSON
object holding only what the native fields cannot say:

- ``"event"``: a patch of the event's JSON (without its content) over the JSON rebuilt from the
  native fields — ``{"set": {key: value}, "drop": [key], "sub": {key: patch}}``, nested for
  objects. It carries usage and grounding metadata, model version, finish reason, transcriptions,
  auth configs requested, node info and any field a later ADK adds, plus the exact form of
  values the native model normalizes (an empty author, ``turn_complete: false``, …).
- ``"parts"``: one entry per ADK part, in order: ``{"part": <the part's JSON>}`` for a part with no
  native form (thoughts, inline or file data, executable code, code results, …), else a patch of
  the part over its native form (e.g. a function call's ``thought_signature``). Omitted when
  every part is native and exact.
- ``"content"``: a patch of the content (its role and parts) over the rebuilt one, when needed.
- ``"create": true`` marks the event holding the state given to ``create_session``.

Reading back applies the patches, so ``to_adk(from_adk(e))`` equals ``e`` (a property test
checks it). ADK's own ``custom_metadata`` stays native; a key ``_adk`` in it is kept by the
patch.
"""

from __future__ import annotations

from typing import Any

import orjson

from eventstore import (
    CONFIRMATION_REQUIRED_KIND,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    is_placeholder_response,
)

__all__ = [
    "EXTENSION_KEY",
    "adk_json_of",
    "apply_patch",
    "diff",
    "event_from_adk_json",
    "event_to_adk_json",
    "is_creation_event",
]

EXTENSION_KEY = "_adk"
"""Key of the extension field in ``Event.custom_metadata``."""

Json = dict[str, Any]


def diff(orig: Json, back: Json) -> Json:
    """Return the patch that turns ``back`` into ``orig`` (empty when they are equal)."""
    out: Json = {}
    sets: Json = {}
    subs: Json = {}
    for key, value in orig.items():
        if key not in back:
            sets[key] = value
            continue
        other = back[key]
        if type(value) is type(other) and value == other:
            continue
        if isinstance(value, dict) and isinstance(other, dict):
            nested = diff(value, other)
            if nested:
                subs[key] = nested
        else:
            sets[key] = value
    drops = [key for key in back if key not in orig]
    if sets:
        out["set"] = sets
    if drops:
        out["drop"] = drops
    if subs:
        out["sub"] = subs
    return out


def apply_patch(back: Json, patch: Json) -> Json:
    """Return ``back`` with ``patch`` (from ``diff``) applied; ``back`` is not changed."""
    if not patch:
        return back
    out = dict(back)
    for key in patch.get("drop", ()):
        out.pop(key, None)
    for key, nested in patch.get("sub", {}).items():
        out[key] = apply_patch(out[key], nested)
    out.update(patch.get("set", {}))
    return out


# -- parts -------------------------------------------------------------------------------------


def _native_part(raw: Json) -> Part | None:
    """The native form of an ADK part, or None when it has none."""
    if raw.get("thought"):
        return None  # a thought is not text for the model; kept whole in the extension
    text = raw.get("text")
    if isinstance(text, str):
        return Part(text=text)
    call = raw.get("function_call")
    if isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(
        call.get("name"), str
    ) and isinstance(call.get("args", {}), dict):
        return Part(function_call=FunctionCall(id=call["id"], name=call["name"],
                                               args=call.get("args") or {}))
    response = raw.get("function_response")
    if isinstance(response, dict) and isinstance(response.get("id"), str) and isinstance(
        response.get("name"), str
    ) and isinstance(response.get("response", {}), dict):
        return Part(function_response=FunctionResponse(
            id=response["id"], name=response["name"], response=response.get("response") or {}
        ))
    return None


def _part_json(part: Part) -> Json:
    if part.text is not None:
        return {"text": part.text}
    if part.function_call is not None:
        call = part.function_call
        return {"function_call": {"id": call.id, "name": call.name, "args": call.args}}
    if part.function_response is not None:
        response = part.function_response
        return {"function_response": {"id": response.id, "name": response.name,
                                      "response": response.response}}
    assert part.artifact is not None
    ref = part.artifact
    # ADK has no artifact part: a reference reads back as file data naming the version.
    return {"file_data": {"file_uri": f"artifact://{ref.filename}#{ref.version}",
                          "mime_type": ref.mime_type}}


def _content_json(content: Content | None, ext: Json) -> Json | None:
    entries: list[Json] = ext.get("parts", [])
    if content is None and not entries:
        return None
    natives = iter(content.parts if content is not None else ())
    parts: list[Json] = []
    for entry in entries:
        if "part" in entry:
            parts.append(entry["part"])
        else:
            parts.append(apply_patch(_part_json(next(natives)), entry.get("patch", {})))
    parts.extend(_part_json(p) for p in natives)
    role = content.role if content is not None else "model"
    return apply_patch({"parts": parts, "role": role}, ext.get("content", {}))


# -- events ------------------------------------------------------------------------------------

_DEFAULT_ACTIONS: Json = {
    "state_delta": {}, "artifact_delta": {}, "requested_auth_configs": {},
    "requested_tool_confirmations": {},
}


def _actions_json(actions: EventActions) -> Json:
    out: Json = dict(_DEFAULT_ACTIONS)
    out["state_delta"] = actions.state_delta
    out["artifact_delta"] = actions.artifact_delta
    out["requested_tool_confirmations"] = {
        k: {"hint": c.hint, "confirmed": c.confirmed, "payload": c.payload}
        for k, c in actions.requested_tool_confirmations.items()
    }
    if actions.skip_summarization:
        out["skip_summarization"] = True
    if actions.escalate:
        out["escalate"] = True
    if actions.transfer_to_agent is not None:
        out["transfer_to_agent"] = actions.transfer_to_agent
    return out


def _rest_json(event: Event, defaults: Json) -> Json:
    """The ADK JSON of an event's non-content fields, as the native fields give it (over
    ``defaults``: what ADK writes for every event, e.g. ``node_info``)."""
    out: Json = {
        **defaults,
        "invocation_id": event.invocation_id,
        "author": event.author,
        "actions": _actions_json(event.actions),
        "id": event.id,
        "timestamp": event.timestamp,
    }
    if event.long_running_tool_ids:
        out["long_running_tool_ids"] = list(event.long_running_tool_ids)
    if event.branch is not None:
        out["branch"] = event.branch
    if event.turn_complete:
        out["turn_complete"] = True
    if event.error_code is not None:
        out["error_code"] = event.error_code
    if event.error_message is not None:
        out["error_message"] = event.error_message
    metadata = {k: v for k, v in event.custom_metadata.items() if k != EXTENSION_KEY}
    if metadata:
        out["custom_metadata"] = metadata
    return out


def _confirmations(raw: Any) -> dict[str, ToolConfirmation]:
    out: dict[str, ToolConfirmation] = {}
    if isinstance(raw, dict):
        for call_id, value in raw.items():
            if isinstance(value, dict):
                hint = value.get("hint", "")
                confirmed = value.get("confirmed", False)
                out[call_id] = ToolConfirmation(
                    hint=hint if isinstance(hint, str) else "",
                    confirmed=confirmed if isinstance(confirmed, bool) else False,
                    payload=value.get("payload"),
                )
    return out


_CONTENT_KEYS = frozenset(("parts", "role"))


def _confirmations_requested(raw: Json) -> frozenset[str]:
    actions = raw.get("actions")
    requested = actions.get("requested_tool_confirmations") if isinstance(actions, dict) else None
    return frozenset(requested) if isinstance(requested, dict) else frozenset()


def _as_placeholder(part: Part, waiting: frozenset[str]) -> Part:
    """A function response of a call its own event asks a confirmation for is stored natively
    as the ``confirmation_required`` placeholder (docs/protocol.md §5), whatever ADK wrote as
    the response (its "requires confirmation" error, or what the tool returned after
    ``request_confirmation``): the call did not run, so no reader may take it as settled. The
    part's patch keeps ADK's own response."""
    response = part.function_response
    if response is None or response.id not in waiting or is_placeholder_response(
            response.response):
        return part
    error = response.response.get("error")
    message = error if isinstance(error, str) else "This tool call requires confirmation."
    return Part(function_response=FunctionResponse(
        id=response.id, name=response.name,
        response={"error": {"kind": CONFIRMATION_REQUIRED_KIND, "tool": response.name,
                            "message": message}},
    ))


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def event_from_adk_json(
    raw: Json, *, create: bool = False, defaults: Json | None = None, store_id: str | None = None
) -> Event:
    """Return the store event for an ADK event's JSON object (see the module docstring).

    ``raw`` is what ``adk_event.model_dump_json(exclude_none=True)`` gives, decoded.
    ``store_id``, when given, is the store event's id instead of ADK's (which the extension
    then keeps, so the event reads back with ADK's id). ``create``
    marks the event holding ``create_session``'s state. ``defaults`` are the fields ADK writes
    for every event (not repeated in the extension); pass the same to ``event_to_adk_json``.
    """
    raw = dict(raw)
    if isinstance(raw.get("long_running_tool_ids"), list):
        # A set in ADK: its JSON order is arbitrary, and any order reads back the same set.
        raw["long_running_tool_ids"] = sorted(raw["long_running_tool_ids"])
    author = raw.get("author")
    author = author if isinstance(author, str) and author else "user"
    ext: Json = {}
    content: Content | None = None
    raw_content = raw.pop("content", None)
    if isinstance(raw_content, dict):
        natives: list[Part] = []
        entries: list[Json] = []
        waiting = _confirmations_requested(raw)
        for part_raw in raw_content.get("parts") or []:
            native = _native_part(part_raw) if isinstance(part_raw, dict) else None
            if native is not None and waiting:
                native = _as_placeholder(native, waiting)
            if native is None:
                entries.append({"part": part_raw})
            else:
                natives.append(native)
                patch = diff(part_raw, _part_json(native))
                entries.append({"patch": patch} if patch else {})
        role = raw_content.get("role")
        content = Content(
            role=role if role in ("user", "model") else ("user" if author == "user" else "model"),
            parts=tuple(natives),
        )
        if any(entries):
            ext["parts"] = entries
        # Every part native and exact, and nothing else in the content but a role we keep:
        # the rebuilt content would equal it, so there is no patch to compute.
        if (ext or raw_content.keys() != _CONTENT_KEYS or role != content.role
                or type(raw_content["parts"]) is not list):
            rebuilt = _content_json(content, ext)
            assert rebuilt is not None
            content_patch = diff(raw_content, rebuilt)
            if content_patch:
                ext["content"] = content_patch
    elif raw_content is not None:
        ext["content_raw"] = raw_content
    actions = raw.get("actions") if isinstance(raw.get("actions"), dict) else {}
    assert isinstance(actions, dict)
    state_delta = actions.get("state_delta")
    artifact_delta = actions.get("artifact_delta")
    transfer = actions.get("transfer_to_agent")
    metadata = raw.get("custom_metadata")
    timestamp = raw.get("timestamp")
    lr_ids = raw.get("long_running_tool_ids")
    kept_metadata: Json = ({k: v for k, v in metadata.items() if k != EXTENSION_KEY}
                           if isinstance(metadata, dict) else {})
    event = Event(
        author=author,
        id=raw["id"] if store_id is None else store_id,
        invocation_id=_str_or_none(raw.get("invocation_id")) or "",
        branch=_str_or_none(raw.get("branch")),
        timestamp=float(timestamp) if isinstance(timestamp, (int, float)) else 0.0,
        content=content,
        actions=EventActions(
            state_delta=dict(state_delta) if isinstance(state_delta, dict) else {},
            artifact_delta={k: v for k, v in artifact_delta.items() if type(v) is int}
            if isinstance(artifact_delta, dict) else {},
            requested_tool_confirmations=_confirmations(
                actions.get("requested_tool_confirmations")
            ),
            skip_summarization=actions.get("skip_summarization") is True,
            escalate=actions.get("escalate") is True,
            transfer_to_agent=transfer if isinstance(transfer, str) else None,
        ),
        long_running_tool_ids=tuple(i for i in lr_ids if isinstance(i, str))
        if isinstance(lr_ids, list) else (),
        turn_complete=raw.get("turn_complete") is True,
        error_code=_str_or_none(raw.get("error_code")),
        error_message=_str_or_none(raw.get("error_message")),
        custom_metadata=kept_metadata,
    )
    event_patch = diff(raw, _rest_json(event, defaults or {}))
    if event_patch:
        ext["event"] = event_patch
    if create:
        ext["create"] = True
    if ext:
        # The event has not left this function: its metadata dict is still ours to complete
        # (one frozen-dataclass construction instead of two; _rest_json skips this key).
        kept_metadata[EXTENSION_KEY] = ext
    return event


def event_to_adk_json(event: Event, *, defaults: Json | None = None) -> Json:
    """Return the ADK JSON object of a store event: the native fields, patched back by the
    extension field. Events written by other code (no extension) read as their native form."""
    ext = event.custom_metadata.get(EXTENSION_KEY)
    ext = ext if isinstance(ext, dict) else {}
    out = apply_patch(_rest_json(event, defaults or {}), ext.get("event", {}))
    if "content_raw" in ext:
        out["content"] = ext["content_raw"]
    else:
        content = _content_json(event.content, ext)
        if content is not None:
            out["content"] = content
    return out


def adk_json_of(payload: bytes) -> Json:
    """Decode an ADK event's stored JSON bytes (a helper for tests and benchmarks)."""
    value = orjson.loads(payload)
    assert isinstance(value, dict)
    return value


def is_creation_event(event: Event) -> bool:
    """Whether ``event`` holds the state given to ``create_session`` (hidden from ADK reads,
    as ADK's own services show no event for it)."""
    ext = event.custom_metadata.get(EXTENSION_KEY)
    return isinstance(ext, dict) and ext.get("create") is True
