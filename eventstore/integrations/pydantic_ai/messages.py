"""Pydantic AI's ``ModelMessage`` ↔ our events (pure functions, no I/O).

Each message of a conversation is one event whose ``custom_metadata[MESSAGE_KEY]`` holds the
message exactly as ``ModelMessagesTypeAdapter`` dumps it (JSON mode), so loading gives back what
pydantic-ai produced, every part kind included. The event's content is the protocol's reading
of the same message (docs/protocol.md), for ``evs show`` / ``evs pending`` and the runtime:

- a ``ModelResponse`` is a model turn (§2): author = the agent, role ``model``, a text part per
  ``TextPart`` and a function_call per ``ToolCallPart`` (thinking, builtin-tool and file parts
  live in the stored message only: they are not calls anyone answers);
- a ``ModelRequest`` is authored by ``user``: a text part per ``UserPromptPart`` with text, and a
  function_response per tool return or tool retry prompt whose call has no response in the log
  yet (the durable toolset records the results of the tools it runs as they happen, §4).

Files are artifacts: the bytes of every ``BinaryContent`` (user prompts, tool returns, file
parts) are saved as a version of the session's artifact ``pydantic-ai/<sha256>`` and the stored
message keeps the reference in their place (``ARTIFACT_KEY``); the event lists the artifact in
its parts and ``artifact_delta``. Loading puts the bytes back.

Call ids are unique within a session (docs/protocol.md): a call whose id the session already
used is stored under a fresh ``call-<hex>`` id and the turn records the provider's id in
``custom_metadata["provider_call_ids"]``; the stored message keeps the provider's id.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_jsonable_python

from eventstore import Content, Event, FunctionCall, FunctionResponse, Part

__all__ = [
    "ARTIFACT_KEY",
    "MESSAGE_KEY",
    "PROVIDER_CALL_IDS_KEY",
    "TOOL_KINDS_KEY",
    "call_id_map",
    "artifact_refs",
    "dump_message",
    "split_binaries",
    "messages_of",
    "request_event",
    "response_event",
    "result_payload",
]

MESSAGE_KEY = "pydantic_ai_message"
"""``custom_metadata`` key of an event that holds one pydantic-ai message (stable string)."""
PROVIDER_CALL_IDS_KEY = "provider_call_ids"
"""``custom_metadata`` key of a model turn: ``{stored call id: the provider's id}``."""
TOOL_KINDS_KEY = "pydantic_ai_tool_kinds"
"""``custom_metadata`` key of a model turn: ``{tool name: kind}`` of the tools it could call."""


ARTIFACT_KEY = "eventstore_artifact"
"""Key, inside a stored binary content, of ``{"filename", "version"}`` standing for its bytes."""


def split_binaries(dumped: dict[str, Any]) -> list[tuple[dict[str, Any], bytes, str]]:
    """The binary contents of a dumped message: (its mapping, its bytes, its media type).
    The caller saves each and replaces its ``data`` by an ``ARTIFACT_KEY`` reference."""
    found: list[tuple[dict[str, Any], bytes, str]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("kind") == "binary" and isinstance(value.get("data"), str):
                data = base64.urlsafe_b64decode(value["data"])
                found.append((value, data, str(value.get("media_type") or "")))
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(dumped)
    return found


def artifact_name(data: bytes) -> str:
    """The artifact a binary content is saved under (named by its bytes)."""
    return f"pydantic-ai/{hashlib.sha256(data).hexdigest()[:32]}"


def artifact_refs(events: Iterable[Event]) -> set[tuple[str, int]]:
    """(filename, version) of every artifact the stored messages of ``events`` stand on."""
    refs: set[tuple[str, int]] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            ref = value.get(ARTIFACT_KEY)
            if isinstance(ref, dict):
                refs.add((str(ref["filename"]), int(ref["version"])))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for event in events:
        walk(event.custom_metadata.get(MESSAGE_KEY))
    return refs


def _filled(value: Any, contents: Mapping[tuple[str, int], bytes]) -> Any:
    if isinstance(value, dict):
        ref = value.get(ARTIFACT_KEY)
        if isinstance(ref, dict):
            rest = {k: v for k, v in value.items() if k != ARTIFACT_KEY}
            data = contents[(str(ref["filename"]), int(ref["version"]))]
            return {**rest, "data": base64.urlsafe_b64encode(data).decode()}
        return {k: _filled(v, contents) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, contents) for v in value]
    return value


def dump_message(message: ModelMessage) -> dict[str, Any]:
    """The message as ``ModelMessagesTypeAdapter`` writes it in JSON mode."""
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return dumped


def messages_of(events: Iterable[Event],
                artifacts: Mapping[tuple[str, int], bytes] | None = None) -> list[ModelMessage]:
    """The conversation the events hold, oldest first (events without a message are skipped);
    ``artifacts``: the bytes of the artifacts they reference, by (filename, version)."""
    raw = [e.custom_metadata[MESSAGE_KEY] for e in events if MESSAGE_KEY in e.custom_metadata]
    if artifacts:
        raw = [_filled(r, artifacts) for r in raw]
    return list(ModelMessagesTypeAdapter.validate_python(raw)) if raw else []


def call_id_map(events: Iterable[Event]) -> dict[str, str]:
    """Provider call id → stored call id, the newest turn's use of an id winning."""
    mapping: dict[str, str] = {}
    for event in events:
        if event.content is None or event.content.role != "model":
            continue
        provider = event.custom_metadata.get(PROVIDER_CALL_IDS_KEY) or {}
        for call in event.function_calls():
            mapping[provider.get(call.id, call.id)] = call.id
    return mapping


def _args(part: ToolCallPart) -> dict[str, Any]:
    try:
        return dict(part.args_as_dict())
    except ValueError:  # the model sent arguments that are not a JSON object
        return {"_raw": part.args if isinstance(part.args, str) else str(part.args)}


def response_event(
    message: ModelResponse,
    *,
    author: str,
    invocation_id: str,
    used_ids: Collection[str],
    long_running: Collection[str] = (),
    tool_kinds: Mapping[str, str] | None = None,
) -> tuple[Event, dict[str, str]]:
    """The model turn of ``message`` and its ``{provider id: stored id}`` for its calls.

    ``used_ids``: call and response ids the session already holds; ``long_running``: names of
    tools whose calls wait for a result from outside (they go in ``long_running_tool_ids``)."""
    parts: list[Part] = []
    ids: dict[str, str] = {}
    provider: dict[str, str] = {}
    taken: set[str] = set()
    lr: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.content:
            parts.append(Part(text=part.content))
        elif isinstance(part, ToolCallPart):
            stored = part.tool_call_id
            if stored in used_ids or stored in taken or not stored:
                stored = f"call-{uuid.uuid4().hex}"
                provider[stored] = part.tool_call_id
            taken.add(stored)
            ids[part.tool_call_id] = stored
            parts.append(Part(function_call=FunctionCall(id=stored, name=part.tool_name,
                                                         args=_args(part))))
            if part.tool_name in long_running:
                lr.append(stored)
    metadata: dict[str, Any] = {MESSAGE_KEY: dump_message(message)}
    if provider:
        metadata[PROVIDER_CALL_IDS_KEY] = provider
    if tool_kinds:
        metadata[TOOL_KINDS_KEY] = dict(tool_kinds)
    if message.model_name:
        metadata["model"] = message.model_name
    metadata["usage"] = to_jsonable_python(message.usage)
    event = Event(
        author=author,
        invocation_id=invocation_id,
        content=Content(role="model", parts=tuple(parts)),
        long_running_tool_ids=tuple(lr),
        turn_complete=True,
        custom_metadata=metadata,
    )
    return event, ids


def result_payload(value: Any) -> dict[str, Any]:
    """A tool's return value as a function_response mapping (a mapping, or ``{"result": v}``)."""
    plain = to_jsonable_python(value)
    if isinstance(plain, dict) and all(isinstance(k, str) for k in plain):
        return plain
    return {"result": plain}


def request_event(
    message: ModelRequest,
    *,
    invocation_id: str,
    call_ids: Mapping[str, str],
    answered: Collection[str],
) -> Event:
    """The user-side event of ``message``; ``call_ids``: provider → stored ids, ``answered``:
    stored ids that already have a response in the log (their returns are not repeated)."""
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            if isinstance(part.content, str):
                parts.append(Part(text=part.content))
            else:
                text = " ".join(c for c in part.content if isinstance(c, str))
                if text:
                    parts.append(Part(text=text))
        elif isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name:
            stored = call_ids.get(part.tool_call_id, part.tool_call_id)
            if stored in answered:
                continue
            if isinstance(part, ToolReturnPart) and part.outcome == "success":
                response = result_payload(part.content)
            elif isinstance(part, ToolReturnPart):
                kind = "retry" if part.outcome == "retried" else part.outcome
                response = {"error": {"kind": kind, "tool": part.tool_name,
                                      "message": part.model_response_str()}}
            else:
                response = {"error": {"kind": "retry", "tool": part.tool_name,
                                      "message": part.model_response()}}
            parts.append(Part(function_response=FunctionResponse(
                id=stored, name=part.tool_name, response=response)))
    return Event(
        author="user",
        invocation_id=invocation_id,
        content=Content(role="user", parts=tuple(parts)) if parts else None,
        custom_metadata={MESSAGE_KEY: dump_message(message)},
    )
