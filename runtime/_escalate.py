"""Escalation: a tool that sets ``escalate`` ends the current invocation.

As a loop agent exits when a sub-agent escalates, the runner stops after the step whose response
event carries ``actions.escalate`` (the responses are appended first, so nothing that ran is lost)
with status ``escalated``. The reason names the escalating tools and what they answered: a
response's ``reason``, ``message`` or ``result`` string, else its JSON. The same event ends a
later run that has nothing new to show the model, so a restart does not undo the escalation.
Inside an ``AgentTool`` the child's escalation stays in the child (control plane isolated).
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.replay._escalation import escalation_reason_from_event, escalation_sentence
from runtime.tools import CallOutcome

__all__ = ["escalation_reason", "escalation_reason_from_event"]


def escalation_reason(invocation_id: str, outcomes: Iterable[CallOutcome]) -> str:
    """The sentence naming the calls of a step that set ``escalate`` and what they answered."""
    escalating = [(o.call_id, o.tool_name, o.response) for o in outcomes if o.actions.escalate]
    return escalation_sentence(invocation_id, escalating)
