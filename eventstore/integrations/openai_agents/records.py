"""What a durable run (``EventStoreRunner``) writes to the session's log, and its reading.

Every event of a run carries ``custom_metadata["openai_agents_run"]`` (``RUN_KEY``) with the
run's id under ``"run"`` and what the event is:

- ``{"start": {"input": …, "agent": name}}`` — the run began (author ``user``, no content);
- ``{"model": k, "response": …}`` — the run's ``k``-th model response (0-based), recorded
  before anything acts on it: a model turn (docs/protocol.md §2/§8), author the agent, its
  text and function calls mirrored natively, each call under ``mirrored_call_id(call id,
  event id)`` so ``evs show`` pairs it and ``evs pending`` reads it;
- a claim (§3, ``claim_event``) with ``{"claim": <SDK call id>}``, appended before the tool's
  body runs;
- ``{"output": <SDK call id>}`` — the tool's output as a §4 function response
  ``{"output": value}``;
- ``{"item": n}`` beside the session's ``{"item": …}`` meaning — the run's ``n``-th session item
  (the SDK's ``Session.add_items``), mirrored natively only when it is the user's input (the
  model turns and responses above already show the rest);
- ``{"interrupt": {"state", "models", "items", "calls", "nested"}}`` — the run stopped for
  approvals: a §5 confirmation request (after the §4 ``confirmation_required`` placeholders)
  holding the SDK's ``RunState.to_json()``, how many model responses and items the run had
  then, ``{confirmation id: SDK call id}`` for its own calls, and ``[agent, SDK call id]`` of
  the calls asked inside agent tools (no content of its own when those are all: the child
  sessions hold their requests);
- in an agent tool's child session, the first event is the link to the parent call
  (``PARENT_LINK_KEY``, as the runtime's ``AgentTool`` writes it), appended with the child's
  run start; the child's run is recorded as any run;
- ``{"end": "completed" | "error"}`` — the run returned (or raised).

``RunRecord`` is sans-IO: fed a session's events oldest first from the newest run's start, it
says what that run has recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    CallLedger,
    Content,
    Event,
    FunctionCall,
    Part,
)

from .items import mirrored_call_id

__all__ = [
    "RUN_KEY",
    "RunRecord",
    "decode_model_response",
    "encode_model_response",
    "model_event",
    "output_value",
    "recorded_output",
]

RUN_KEY = "openai_agents_run"
"""Key in ``Event.custom_metadata`` of what an event means to a durable run (see the module)."""

_OUTPUT_ITEM: TypeAdapter[Any] | None = None


def _output_adapter() -> TypeAdapter[Any]:
    global _OUTPUT_ITEM
    if _OUTPUT_ITEM is None:
        from agents.items import TResponseOutputItem

        _OUTPUT_ITEM = TypeAdapter(TResponseOutputItem)
    return _OUTPUT_ITEM


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


def encode_model_response(response: Any) -> dict[str, Any]:
    """The JSON form of an SDK ``ModelResponse`` (its output items, usage and ids)."""
    from agents.usage import serialize_usage

    return {
        "output": [_plain(item) for item in response.output],
        "usage": serialize_usage(response.usage),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def decode_model_response(data: Mapping[str, Any]) -> Any:
    """The SDK ``ModelResponse`` ``encode_model_response`` wrote."""
    from agents.items import ModelResponse
    from agents.usage import deserialize_usage

    adapter = _output_adapter()
    output = []
    for item in data.get("output", []):
        try:
            output.append(adapter.validate_python(item))
        except ValueError:
            output.append(item)  # a type this SDK version does not model: kept as given
    return ModelResponse(output=output, usage=deserialize_usage(data.get("usage") or {}),
                         response_id=data.get("response_id"), request_id=data.get("request_id"))


def model_event(*, run_id: str, step: int, author: str, response: Mapping[str, Any],
                event_id: str, skip_calls: frozenset[str]) -> Event:
    """The model turn event of step ``step``: text and function calls mirrored natively (the
    calls named in ``skip_calls``, handoffs, are not: the SDK runs them without a tool)."""
    parts: list[Part] = []
    for item in response.get("output", []):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            texts = [str(c["text"]) for c in item.get("content") or ()
                     if isinstance(c, Mapping) and isinstance(c.get("text"), str)]
            if texts:
                parts.append(Part(text="".join(texts)))
        elif item.get("type") == "function_call" and item.get("name") not in skip_calls:
            parts.append(Part(function_call=FunctionCall(
                id=mirrored_call_id(str(item.get("call_id")), event_id),
                name=str(item.get("name", "")), args=_arguments(item.get("arguments")))))
    return Event(
        id=event_id, author=author, invocation_id=run_id,
        content=Content(role="model", parts=tuple(parts)) if parts else None,
        turn_complete=True,
        custom_metadata={RUN_KEY: {"run": run_id, "model": step, "response": dict(response)}},
    )


def _arguments(raw: Any) -> dict[str, Any]:
    try:
        args = orjson.loads(raw) if isinstance(raw, str) else None
    except orjson.JSONDecodeError:
        args = None
    return args if isinstance(args, dict) else {"arguments": raw}


def output_value(value: Any) -> Any:
    """A tool's output as the log keeps it: JSON values as they are, a pydantic model as its
    JSON form (the SDK's ``ToolOutputText`` … give back mappings the SDK reads alike),
    anything else as ``str(value)``, which is what the SDK sends the model for it."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, BaseModel) for v in value):
        return [v.model_dump(mode="json") for v in value]
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:
        return str(value)


def recorded_output(response: Mapping[str, Any]) -> Any:
    """What a replayed tool returns for a recorded response: its ``output`` when the runner
    wrote it (``{"output": value}``), else the mapping as given (``evs respond``'s result)."""
    if set(response) == {"output"}:
        return response["output"]
    return dict(response)


@dataclasses.dataclass(kw_only=True)
class Interruption:
    """A run's stop for approvals, as recorded."""

    state: dict[str, Any]
    """The SDK's ``RunState.to_json()`` at the stop."""
    models: int
    """Model responses the run had recorded then."""
    items: int
    """Session items the run had recorded then."""
    calls: dict[str, str]
    """Confirmation id → SDK call id."""
    originals: dict[str, str]
    """Confirmation id → the call's id in the log (mirrored)."""
    nested: list[list[str]] = dataclasses.field(default_factory=list)
    """``[agent name, SDK call id]`` of the calls asked inside agent tools (their child
    sessions hold those confirmation requests)."""


@dataclasses.dataclass(kw_only=True)
class RunRecord:
    """What one run has recorded, fed its events oldest first (from its start event)."""

    run_id: str
    start_seq: int
    input: Any
    agent: str
    models: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Recorded model responses by step."""
    model_event_ids: list[str] = dataclasses.field(default_factory=list)
    items: list[Any] = dataclasses.field(default_factory=list)
    """The run's session items, in order."""
    ledger: CallLedger = dataclasses.field(default_factory=CallLedger)
    interruption: Interruption | None = None
    answers: dict[str, bool] = dataclasses.field(default_factory=dict)
    """Confirmation id → the human's answer (the newest one)."""
    ended: str | None = None
    version: int = 0

    @classmethod
    def starting(cls, event: Event) -> RunRecord | None:
        """The record a run's start event opens, or None for any other event."""
        meaning = event.custom_metadata.get(RUN_KEY)
        if not isinstance(meaning, Mapping) or not isinstance(meaning.get("start"), Mapping):
            return None
        start = meaning["start"]
        record = cls(run_id=str(meaning.get("run")), start_seq=event.seq or 0,
                     input=start.get("input"), agent=str(start.get("agent", "")))
        record.version = event.seq or 0
        return record

    def feed(self, event: Event) -> None:
        """Take the next (newer) event of the session."""
        if event.seq is not None:
            self.version = event.seq
        self.ledger.feed(event)
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                confirmed = _confirmed(response.response)
                if confirmed is not None:
                    self.answers[response.id] = confirmed
        meaning = event.custom_metadata.get(RUN_KEY)
        if not isinstance(meaning, Mapping) or meaning.get("run") != self.run_id:
            return
        if "model" in meaning and meaning.get("model") == len(self.models):
            self.models.append(dict(meaning.get("response") or {}))
            self.model_event_ids.append(event.id)
        elif "item" in meaning:
            from .items import METADATA_KEY

            item = event.custom_metadata.get(METADATA_KEY, {}).get("item")
            if meaning["item"] == len(self.items):
                self.items.append(item)
        elif isinstance(meaning.get("interrupt"), Mapping):
            stop = meaning["interrupt"]
            self.interruption = Interruption(
                state=dict(stop.get("state") or {}), models=int(stop.get("models", 0)),
                items=int(stop.get("items", 0)), calls=dict(stop.get("calls") or {}),
                originals={c.id: str(c.args.get("originalFunctionCall", {}).get("id"))
                           for c in event.function_calls()},
                nested=[list(map(str, pair)) for pair in stop.get("nested") or ()])
        elif "end" in meaning:
            self.ended = str(meaning["end"])

    def call_map(self) -> dict[str, str]:
        """SDK call id → mirrored id, for the calls of every recorded model response (a
        later response's call of a repeated id wins, as the SDK runs it after)."""
        found: dict[str, str] = {}
        for response, event_id in zip(self.models, self.model_event_ids, strict=True):
            for item in response.get("output", []):
                if isinstance(item, Mapping) and item.get("type") == "function_call":
                    call_id = str(item.get("call_id"))
                    found[call_id] = mirrored_call_id(call_id, event_id)
        return found


def _confirmed(response: Mapping[str, Any]) -> bool | None:
    value: Any = response
    if isinstance(response.get("response"), str):
        try:
            value = orjson.loads(response["response"])
        except orjson.JSONDecodeError:
            return None
    if isinstance(value, Mapping) and isinstance(value.get("confirmed"), bool):
        return bool(value["confirmed"])
    return None
