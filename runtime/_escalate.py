"""Escalation: a tool that sets ``escalate`` ends the current invocation.

As a loop agent exits when a sub-agent escalates, the runner stops after the step whose response
event carries ``actions.escalate`` (the responses are appended first, so nothing that ran is lost)
with status ``escalated``. The reason names the escalating tools and what they answered: a
response's ``reason``, ``message`` or ``result`` string, else its JSON. The same event ends a
later run that has nothing new to show the model, so a restart does not undo the escalation.
Inside an ``AgentTool`` the child's escalation stays in the child (control plane isolated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from eventstore import Event, FunctionResponse
from runtime.tools import CallOutcome

__all__ = ["escalation_reason", "escalation_reason_from_event"]

_REASON_KEYS = ("reason", "message", "result")


def _said(response: Mapping[str, Any] | None) -> str:
    if not response:
        return "no reason given"
    for key in _REASON_KEYS:
        value = response.get(key)
        if isinstance(value, str) and value:
            return value
    return orjson.dumps(response, option=orjson.OPT_SORT_KEYS, default=str).decode()


def _sentence(
    invocation_id: str, answers: Iterable[tuple[str, str, Mapping[str, Any] | None]]
) -> str:
    parts = [
        f"tool {name!r} (call {call_id}): {_said(response)}" for call_id, name, response in answers
    ]
    return f"Invocation {invocation_id!r} was escalated by " + "; ".join(parts) + "."


def escalation_reason(invocation_id: str, outcomes: Iterable[CallOutcome]) -> str:
    """The sentence naming the calls of a step that set ``escalate`` and what they answered."""
    escalating = [(o.call_id, o.tool_name, o.response) for o in outcomes if o.actions.escalate]
    return _sentence(invocation_id, escalating)


def escalation_reason_from_event(event: Event) -> str | None:
    """The escalation sentence of a stored response event, or ``None`` when it did not escalate.

    The merged event does not say which call escalated, so every answer in it is named.
    """
    if not event.actions.escalate:
        return None
    responses: list[FunctionResponse] = event.function_responses()
    return _sentence(event.invocation_id or "", ((r.id, r.name, r.response) for r in responses))
