"""Escalation as the log records it: the sentence that names who escalated and why.

Pure functions over events and answers (no I/O), shared by the runner (which ends an invocation
whose step escalated) and ``HeadScan`` (a later run with nothing new stays escalated), so both
say the same sentence. The reason of an answer is its ``reason``, ``message`` or ``result``
string, else its JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from eventstore import Event

__all__ = ["escalation_reason_from_event", "escalation_sentence"]

_REASON_KEYS = ("reason", "message", "result")


def _said(response: Mapping[str, Any] | None) -> str:
    if not response:
        return "no reason given"
    for key in _REASON_KEYS:
        value = response.get(key)
        if isinstance(value, str) and value:
            return value
    return orjson.dumps(response, option=orjson.OPT_SORT_KEYS, default=str).decode()


def escalation_sentence(
    invocation_id: str, answers: Iterable[tuple[str, str, Mapping[str, Any] | None]]
) -> str:
    """The sentence naming each ``(call id, tool name, response)`` that escalated."""
    parts = [
        f"tool {name!r} (call {call_id}): {_said(response)}" for call_id, name, response in answers
    ]
    return f"Invocation {invocation_id!r} was escalated by " + "; ".join(parts) + "."


def escalation_reason_from_event(event: Event) -> str | None:
    """The escalation sentence of a stored response event, or ``None`` when it did not escalate.

    The merged event does not say which call escalated, so every answer in it is named.
    """
    if not event.actions.escalate:
        return None
    responses = event.function_responses()
    return escalation_sentence(
        event.invocation_id or "", ((r.id, r.name, r.response) for r in responses)
    )
