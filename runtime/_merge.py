"""Merging the outcomes of one step's calls into the single response event's content and actions.

Pure functions: the merge depends only on the outcomes *in the order of the calls*, never on the
order the calls finished in, so parallel and sequential runs of the same step write the same event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventstore import Content, EventActions, FunctionResponse, Part, ToolConfirmation
from runtime.tools import CallOutcome

__all__ = ["MergedResponses", "deep_merge", "merge_actions", "merge_outcomes"]


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated with ``update``; nested mappings merge key by key, later wins.

    Neither argument is modified. A ``None`` in ``update`` replaces the value (``None`` is a
    value; deletions travel in ``EventActions.state_deletions``).
    """
    merged = dict(base)
    for key, value in update.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def merge_actions(actions: Sequence[EventActions]) -> EventActions:
    """Merge actions in order: state deltas deep-merged, artifact deltas and confirmation requests
    updated (later wins), ``skip_summarization``/``escalate`` OR-ed, the last transfer wins. A
    deletion and a write of the same key: the later one wins."""
    state: dict[str, Any] = {}
    deletions: dict[str, None] = {}
    artifacts: dict[str, int] = {}
    confirmations: dict[str, ToolConfirmation] = {}
    skip = escalate = False
    transfer: str | None = None
    for action in actions:
        state = deep_merge(state, action.state_delta)
        for key in action.state_delta:
            deletions.pop(key, None)
        for key in action.state_deletions:
            state.pop(key, None)
            deletions[key] = None
        artifacts.update(action.artifact_delta)
        confirmations.update(action.requested_tool_confirmations)
        skip = skip or action.skip_summarization
        escalate = escalate or action.escalate
        transfer = action.transfer_to_agent or transfer
    return EventActions(
        state_delta=state,
        state_deletions=tuple(deletions),
        artifact_delta=artifacts,
        requested_tool_confirmations=confirmations,
        skip_summarization=skip,
        escalate=escalate,
        transfer_to_agent=transfer,
    )


@dataclass(frozen=True, kw_only=True)
class MergedResponses:
    """The merge of one step: responses in call order and the merged actions."""

    responses: tuple[FunctionResponse, ...]
    """One response per answered call, in the order of the calls (deferred calls left out)."""
    actions: EventActions
    """The actions of every outcome (answered or deferred) merged in call order."""
    pending_call_ids: tuple[str, ...]
    """Calls with no response now (long-running or deferred), in call order."""

    def content(self) -> Content | None:
        """Return the response event's content (role ``user``), ``None`` when nothing answered."""
        if not self.responses:
            return None
        return Content(role="user", parts=tuple(Part(function_response=r) for r in self.responses))


def merge_outcomes(outcomes: Sequence[CallOutcome]) -> MergedResponses:
    """Merge outcomes given in the order of the calls (see ``MergedResponses``)."""
    responses: list[FunctionResponse] = []
    pending: list[str] = []
    for outcome in outcomes:
        response = outcome.function_response()
        if response is None:
            pending.append(outcome.call_id)
        else:
            responses.append(response)
    return MergedResponses(
        responses=tuple(responses),
        actions=merge_actions([o.actions for o in outcomes]),
        pending_call_ids=tuple(pending),
    )
