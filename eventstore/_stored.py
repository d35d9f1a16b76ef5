"""The stored encoding of an event payload (schema version 2): compact, deterministic, trusted.

The event JSON (``encode_event``, schema version 1) writes every field, defaults included, and
repeats what the row's own columns hold (id, author, invocation id, timestamp): about 1.8 times the
event's compact JSON. The payload a backend stores is smaller:

- the envelope's fields live in the row's columns only (``NewEvent``/``StoredEvent``), so the
  payload never repeats them — an idempotent retry compares them as well as the payload
  (``backends.protocol.check_retry``);
- fields at their default value are omitted (the decoder restores them), ``partial`` is never
  stored (partial events are refused);
- structural keys are short and function calls/responses and artifact references are arrays
  (``{"fc": [id, name, args]}``); the application's own JSON (args, responses, state deltas,
  metadata, confirmation payloads) is stored as it is;
- keys are sorted (orjson ``OPT_SORT_KEYS``), so the same event always gives the same bytes.

The key table below is part of the stored format: never change a key; add a new schema
version instead. Keys were added without a new version only where a row without them means
what it meant before: ``actions.cp`` (a compaction: ``[start_seq, end_seq, summary content]``)
is absent from every event that is not a compaction event, so older rows decode unchanged, and
code older than the key reads a compaction event as an empty bookkeeping event (its requests
then hold the whole history, as they did before compaction existed). Rows of schema
version 1 (the full event JSON) keep loading: ``decode_stored`` in ``_statefold`` picks the
decoder by the row's version. Decoding is trusted construction (no
validation): only rows this store wrote are decoded here; imports go through ``decode_event``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import orjson

from ._events import (
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

__all__ = [
    "STORED_SCHEMA_VERSION", "compact_fields", "compact_mapping", "compact_state_change",
    "compact_tree", "decode_compact", "encode_compact",
]

STORED_SCHEMA_VERSION: Final = 2
"""Schema version of the payloads this code stores (1: the full event JSON)."""

_ROLES: Final = {"user": "u", "model": "m"}
_ROLE_NAMES: Final = {"u": "user", "m": "model"}
_DEFAULT_MIME: Final = "application/octet-stream"
_NO_ACTIONS: Final = EventActions()
_EVENT_KEYS: Final = frozenset({"b", "c", "a", "l", "s", "t", "ec", "em", "m"})
_set = object.__setattr__
_new = object.__new__


def _part(part: Part) -> dict[str, Any]:
    if part.text is not None:
        return {"t": part.text}
    call = part.function_call
    if call is not None:
        return {"fc": [call.id, call.name, call.args]}
    response = part.function_response
    if response is not None:
        return {"fr": [response.id, response.name, response.response]}
    ref = part.artifact
    assert ref is not None
    if ref.mime_type == _DEFAULT_MIME:
        return {"ar": [ref.filename, ref.version]}
    return {"ar": [ref.filename, ref.version, ref.mime_type]}


def _confirmation(confirmation: ToolConfirmation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if confirmation.hint:
        out["h"] = confirmation.hint
    if confirmation.confirmed:
        out["c"] = True
    if confirmation.payload is not None:
        out["p"] = confirmation.payload
    return out


def _actions(actions: EventActions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if actions.state_delta:
        out["sd"] = actions.state_delta
    if actions.state_deletions:
        out["sx"] = list(actions.state_deletions)
    if actions.artifact_delta:
        out["ad"] = actions.artifact_delta
    if actions.requested_tool_confirmations:
        out["rc"] = {k: _confirmation(v)
                     for k, v in actions.requested_tool_confirmations.items()}
    if actions.skip_summarization:
        out["ss"] = True
    if actions.escalate:
        out["e"] = True
    if actions.transfer_to_agent is not None:
        out["tr"] = actions.transfer_to_agent
    compaction = actions.compaction
    if compaction is not None:
        summary = compaction.summary
        out["cp"] = [compaction.start_seq, compaction.end_seq,
                     {"r": _ROLES[summary.role], "p": [_part(p) for p in summary.parts]}]
    return out


def encode_compact(event: Event) -> bytes:
    """Return the stored payload (schema version 2) of an event ``encode_event`` accepted.

    Deterministic: the same event gives the same bytes. Id, author, invocation id and timestamp
    are not in it (the row's columns hold them); neither are ``seq`` and ``partial``.
    """
    return orjson.dumps(compact_tree(event), option=orjson.OPT_SORT_KEYS)


def compact_tree(event: Event) -> dict[str, Any]:
    """The stored payload (schema version 2) of ``event`` before serialization: what
    ``encode_compact`` writes, built of dicts, lists and the application's own values (id
    lists are lists, not the event's tuples, so the tree equals its own JSON round trip
    whenever the application's values do)."""
    out: dict[str, Any] = {}
    if event.branch is not None:
        out["b"] = event.branch
    content = event.content
    if content is not None:
        out["c"] = {"r": _ROLES[content.role], "p": [_part(p) for p in content.parts]}
    actions = event.actions
    if actions is not _NO_ACTIONS:
        encoded = _actions(actions)
        if encoded:
            out["a"] = encoded
    if event.long_running_tool_ids:
        out["l"] = list(event.long_running_tool_ids)
    if event.started_call_ids:
        out["s"] = list(event.started_call_ids)
    if event.turn_complete:
        out["t"] = True
    if event.error_code is not None:
        out["ec"] = event.error_code
    if event.error_message is not None:
        out["em"] = event.error_message
    if event.custom_metadata:
        out["m"] = event.custom_metadata
    return out


def _decode_part(raw: dict[str, Any]) -> Part:
    # Trusted construction: a Part this store encoded has exactly one field set, so the
    # check in Part.__post_init__ is skipped (it is a large share of a load's time).
    part = _new(Part)
    text = raw.get("t")
    _set(part, "text", text)
    if text is not None:
        _set(part, "function_call", None)
        _set(part, "function_response", None)
        _set(part, "artifact", None)
        return part
    call = raw.get("fc")
    if call is not None:
        fc = _new(FunctionCall)
        _set(fc, "id", call[0])
        _set(fc, "name", call[1])
        _set(fc, "args", call[2])
        _set(part, "function_call", fc)
        _set(part, "function_response", None)
        _set(part, "artifact", None)
        return part
    _set(part, "function_call", None)
    response = raw.get("fr")
    if response is not None:
        fr = _new(FunctionResponse)
        _set(fr, "id", response[0])
        _set(fr, "name", response[1])
        _set(fr, "response", response[2])
        _set(part, "function_response", fr)
        _set(part, "artifact", None)
        return part
    _set(part, "function_response", None)
    ref = raw["ar"]
    _set(part, "artifact", ArtifactRef(filename=ref[0], version=ref[1],
                                       mime_type=ref[2] if len(ref) > 2 else _DEFAULT_MIME))
    return part


def _decode_compaction(raw: list[Any]) -> Compaction:
    summary = raw[2]
    role: Literal["user", "model"] = "model" if summary["r"] == "m" else "user"
    return Compaction(start_seq=raw[0], end_seq=raw[1], summary=Content(
        role=role, parts=tuple([_decode_part(p) for p in summary["p"]])))


def _decode_actions(raw: dict[str, Any]) -> EventActions:
    confirmations = raw.get("rc")
    compaction = raw.get("cp")
    return EventActions(
        state_delta=raw.get("sd", {}),
        state_deletions=tuple(raw.get("sx", ())),
        artifact_delta=raw.get("ad", {}),
        requested_tool_confirmations={
            k: ToolConfirmation(hint=v.get("h", ""), confirmed=v.get("c", False),
                                payload=v.get("p"))
            for k, v in confirmations.items()
        } if confirmations else {},
        skip_summarization=raw.get("ss", False),
        escalate=raw.get("e", False),
        transfer_to_agent=raw.get("tr"),
        compaction=None if compaction is None else _decode_compaction(compaction),
    )


def decode_compact(
    payload: bytes, *, event_id: str, author: str, invocation_id: str, timestamp: float,
    seq: int,
) -> Event:
    """Rebuild an event from its stored payload (schema version 2) and its row's columns.

    Trusted: no validation beyond what construction does. Raises KeyError, TypeError,
    IndexError or ValueError when the bytes are not what ``encode_compact`` wrote.
    """
    raw = orjson.loads(payload)
    if type(raw) is not dict or not raw.keys() <= _EVENT_KEYS:
        raise ValueError(f"not a stored event payload of schema version 2: {payload[:80]!r}")
    get = raw.get
    event = _new(Event)
    _set(event, "author", author)
    _set(event, "id", event_id)
    _set(event, "invocation_id", invocation_id)
    _set(event, "branch", get("b"))
    _set(event, "timestamp", timestamp)
    content = get("c")
    if content is None:
        _set(event, "content", None)
    else:
        parts = content["p"]
        body = _new(Content)
        _set(body, "role", _ROLE_NAMES[content["r"]])
        _set(body, "parts", tuple([_decode_part(p) for p in parts]))
        _set(event, "content", body)
    actions = get("a")
    _set(event, "actions", _NO_ACTIONS if actions is None else _decode_actions(actions))
    lro = get("l")
    _set(event, "long_running_tool_ids", () if lro is None else tuple(lro))
    started = get("s")
    _set(event, "started_call_ids", () if started is None else tuple(started))
    _set(event, "partial", False)
    _set(event, "turn_complete", get("t", False))
    _set(event, "error_code", get("ec"))
    _set(event, "error_message", get("em"))
    _set(event, "custom_metadata", get("m", {}))
    _set(event, "seq", seq)
    return event


def compact_state_change(payload: bytes) -> tuple[dict[str, Any], list[str]] | None:
    """The ``(state_delta, state_deletions)`` of a stored payload (schema version 2), or None
    when it changes no state, without building the event (what a fold of state needs). Raises
    like ``decode_compact`` on bytes it did not write."""
    raw = orjson.loads(payload)
    if type(raw) is not dict or not raw.keys() <= _EVENT_KEYS:
        raise ValueError(f"not a stored event payload of schema version 2: {payload[:80]!r}")
    actions = raw.get("a")
    if actions is None:
        return None
    delta, deletions = actions.get("sd"), actions.get("sx")
    if delta is None and deletions is None:
        return None
    return delta or {}, deletions or []


def compact_fields(
    payload: bytes, *, event_id: str, author: str, invocation_id: str, timestamp: float,
    seq: int,
) -> dict[str, Any]:
    """The stored payload (schema version 2) as parsed, with the row's columns added under
    their full names (``id``, ``author``, ``invocation_id``, ``timestamp``, ``seq``; no payload
    key is one of them). Raises like ``decode_compact`` on bytes it did not write."""
    raw = orjson.loads(payload)
    if type(raw) is not dict or not raw.keys() <= _EVENT_KEYS:
        raise ValueError(f"not a stored event payload of schema version 2: {payload[:80]!r}")
    raw["id"] = event_id
    raw["author"] = author
    raw["invocation_id"] = invocation_id
    raw["timestamp"] = timestamp
    raw["seq"] = seq
    return raw


def _part_mapping(raw: dict[str, Any]) -> dict[str, Any]:
    text = raw.get("t")
    call = raw.get("fc")
    response = raw.get("fr")
    ref = raw.get("ar")
    return {
        "text": text,
        "function_call": None if call is None
        else {"id": call[0], "name": call[1], "args": call[2]},
        "function_response": None if response is None
        else {"id": response[0], "name": response[1], "response": response[2]},
        "artifact": None if ref is None
        else {"filename": ref[0], "version": ref[1],
              "mime_type": ref[2] if len(ref) > 2 else _DEFAULT_MIME},
    }


def _actions_mapping(raw: dict[str, Any]) -> dict[str, Any]:
    confirmations = raw.get("rc") or {}
    compaction = raw.get("cp")
    return {
        "state_delta": raw.get("sd", {}),
        "state_deletions": raw.get("sx", []),
        "artifact_delta": raw.get("ad", {}),
        "requested_tool_confirmations": {
            k: {"hint": v.get("h", ""), "confirmed": v.get("c", False), "payload": v.get("p")}
            for k, v in confirmations.items()
        },
        "skip_summarization": raw.get("ss", False),
        "escalate": raw.get("e", False),
        "transfer_to_agent": raw.get("tr"),
        "compaction": None if compaction is None else {
            "start_seq": compaction[0], "end_seq": compaction[1], "summary": {
                "role": _ROLE_NAMES[compaction[2]["r"]],
                "parts": [_part_mapping(p) for p in compaction[2]["p"]]}},
    }


def compact_mapping(
    payload: bytes, *, event_id: str, author: str, invocation_id: str, timestamp: float,
    seq: int,
) -> dict[str, Any]:
    """Expand a stored payload (schema version 2) and its row's columns into the event JSON
    mapping (schema version 1: every field, as ``encode_event`` writes it, with ``seq``),
    without building the event. Raises like ``decode_compact`` on bytes it did not write."""
    raw = orjson.loads(payload)
    if type(raw) is not dict or not raw.keys() <= _EVENT_KEYS:
        raise ValueError(f"not a stored event payload of schema version 2: {payload[:80]!r}")
    content = raw.get("c")
    return {
        "id": event_id,
        "invocation_id": invocation_id,
        "author": author,
        "branch": raw.get("b"),
        "timestamp": timestamp,
        "content": None if content is None else {
            "role": _ROLE_NAMES[content["r"]],
            "parts": [_part_mapping(p) for p in content["p"]],
        },
        "actions": _actions_mapping(raw.get("a") or {}),
        "long_running_tool_ids": raw.get("l", []),
        "started_call_ids": raw.get("s", []),
        "partial": False,
        "turn_complete": raw.get("t", False),
        "error_code": raw.get("ec"),
        "error_message": raw.get("em"),
        "custom_metadata": raw.get("m", {}),
        "seq": seq,
    }
