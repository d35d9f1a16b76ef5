"""Deferred tools on the log: pydantic-ai's ``DeferredToolRequests`` as protocol events, and the
``DeferredToolResults`` the next run receives, read back from the log (pure functions).

- An approval (a ``requires_approval=True`` tool, ``ApprovalRequired``) becomes the
  ``confirmation_required`` placeholder response of the call (docs/protocol.md §4) and a
  confirmation request (§5), so ``evs pending`` lists it and ``evs confirm`` / ``evs web``
  answer it (§6) from any process.
- A call deferred to the outside (an external tool, ``CallDeferred``) is claimed (§3) and marked
  long-running, so ``evs respond`` may give its result (§7).
- On resume, every open call of the newest model turn is handed back to pydantic-ai as approved,
  except the ones a human denied (``ToolDenied``: pydantic-ai's denial goes to the model); the
  durable toolset then decides each from the log (recorded result, run now, still waiting).

Only the newest answer to a request counts; an answer that is not a ``{"confirmed": bool}``
mapping (or its JSON string) is ignored, so the call keeps waiting.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)

CONFIRMATION_REQUIRED_KIND = "confirmation_required"
"""The error kind of a call's placeholder response while it waits for a human (protocol §5;
the stable string ``is_placeholder_response`` recognizes)."""

__all__ = [
    "Confirmations",
    "confirmation_events",
    "open_calls",
]


@dataclass
class Confirmations:
    """The confirmation requests and answers of a log: original call id → answer."""

    requested: dict[str, str] = field(default_factory=dict)
    """Original call id → the id of its (newest) confirmation request."""
    answers: dict[str, bool] = field(default_factory=dict)
    """Original call id → confirmed (True) or denied (False), for answered requests."""

    @classmethod
    def of(cls, events: Iterable[Event]) -> Confirmations:
        """Read the requests (§5) and answers (§6) of ``events``, oldest first."""
        found = cls()
        by_request: dict[str, str] = {}
        for event in events:
            for call in event.function_calls():
                if call.name != REQUEST_CONFIRMATION_FUNCTION:
                    continue
                original = call.args.get("originalFunctionCall")
                if isinstance(original, Mapping) and isinstance(original.get("id"), str):
                    by_request[call.id] = original["id"]
                    found.requested[original["id"]] = call.id
            for response in event.function_responses():
                if response.name != REQUEST_CONFIRMATION_FUNCTION:
                    continue
                original_id = by_request.get(response.id)
                confirmed = _confirmed(response.response)
                if original_id is not None and confirmed is not None:
                    found.answers[original_id] = confirmed
        return found


def _confirmed(response: Mapping[str, Any]) -> bool | None:
    if set(response) == {"response"} and isinstance(response["response"], str):
        try:
            response = json.loads(response["response"])
        except ValueError:
            return None
        if not isinstance(response, Mapping):
            return None
    confirmed = response.get("confirmed")
    return confirmed if isinstance(confirmed, bool) else None


def confirmation_events(
    calls: Iterable[tuple[FunctionCall, str]], *, author: str, invocation_id: str
) -> list[Event]:
    """The §4 placeholder responses and the §5 request of ``calls`` (stored call, hint)."""
    listed = list(calls)
    if not listed:
        return []
    placeholders = tuple(
        Part(function_response=FunctionResponse(id=call.id, name=call.name, response={
            "error": {"kind": CONFIRMATION_REQUIRED_KIND, "tool": call.name,
                      "message": f"Tool {call.name!r} needs a human's approval."}}))
        for call, _ in listed
    )
    requests = []
    for call, hint in listed:
        requests.append(FunctionCall(
            id=f"confirm-{uuid.uuid4().hex}",
            name=REQUEST_CONFIRMATION_FUNCTION,
            args={"originalFunctionCall": {"id": call.id, "name": call.name, "args": call.args},
                  "toolConfirmation": {"hint": hint, "confirmed": False, "payload": None}},
        ))
    return [
        Event(author=author, invocation_id=invocation_id,
              content=Content(role="user", parts=placeholders),
              actions=EventActions(requested_tool_confirmations={
                  call.id: ToolConfirmation(hint=hint) for call, hint in listed})),
        Event(author=author, invocation_id=invocation_id,
              content=Content(role="model", parts=tuple(Part(function_call=c) for c in requests)),
              long_running_tool_ids=tuple(c.id for c in requests)),
    ]


def open_calls(
    messages: list[ModelMessage], *, output_tools: Iterable[str] = ()
) -> list[ToolCallPart]:
    """The calls of the newest model response that no later request answers (output tool calls
    excluded: pydantic-ai settles them itself)."""
    answered: set[str] = set()
    skip = set(output_tools)
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                call_id = getattr(part, "tool_call_id", None)
                if isinstance(call_id, str) and getattr(part, "part_kind", "") in (
                        "tool-return", "retry-prompt"):
                    answered.add(call_id)
        elif isinstance(message, ModelResponse):
            return [c for c in message.tool_calls
                    if c.tool_call_id not in answered and c.tool_name not in skip]
    return []
