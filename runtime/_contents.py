"""History → model contents: what the model sees of the session's log.

A pure function of the events (replay determinism): the same log always gives the same contents.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    FunctionCall,
    FunctionResponse,
    Part,
)
from runtime._call_ids import wire_call_ids

__all__ = ["build_contents", "visible_on_branch"]


def visible_on_branch(event: Event, branch: str | None) -> bool:
    """True when an event of ``event.branch`` is visible to an agent on ``branch``.

    Root events (``None``) are visible everywhere; a nested agent sees its own branch and its
    ancestors' (``root`` is visible on ``root.child``), never its siblings'.
    """
    if event.branch is None or event.branch == branch:
        return True
    if branch is None:
        return False
    return branch.startswith(event.branch + ".")


def _model_visible(part: Part) -> bool:
    if part.function_call is not None:
        return part.function_call.name != REQUEST_CONFIRMATION_FUNCTION
    if part.function_response is not None:
        return part.function_response.name != REQUEST_CONFIRMATION_FUNCTION
    return True


def _on_wire(part: Part, wire: dict[str, str]) -> Part:
    """``part`` with the model's own call id when its stored id replaced a reused one."""
    if not wire:
        return part
    call, answer = part.function_call, part.function_response
    if call is not None and call.id in wire:
        return Part(function_call=FunctionCall(id=wire[call.id], name=call.name, args=call.args))
    if answer is not None and answer.id in wire:
        return Part(
            function_response=FunctionResponse(
                id=wire[answer.id], name=answer.name, response=answer.response
            )
        )
    return part


def build_contents(events: Sequence[Event], *, branch: str | None = None) -> list[Content]:
    """Return the contents to send for ``events`` (oldest first).

    Rules: events without content, partial events and events of other branches are skipped;
    confirmation-request calls and their answers are runtime plumbing and are left out; every
    function response is placed right after the model content that made its call — all
    responses to one model turn in one ``user`` content, in call order — and when a call was
    answered more than once (a confirmation error, then the confirmed result) the newest answer is
    the one sent. A response whose call is not in the history stays where it is.

    Calls stored under a fresh id because the model reused an id (``runtime._call_ids``) are
    sent with the model's own id, and so are their responses: pairing uses the stored ids, the
    model sees the ids it gave.
    """
    kept: list[tuple[Content, tuple[Part, ...]]] = []
    latest: dict[str, FunctionResponse] = {}
    called: set[str] = set()
    wire: dict[str, str] = {}
    for event in events:
        if event.content is None or event.partial or not visible_on_branch(event, branch):
            continue
        parts = tuple(p for p in event.content.parts if _model_visible(p))
        if not parts:
            continue
        kept.append((event.content, parts))
        wire.update(wire_call_ids(event))
        for part in parts:
            if part.function_call is not None:
                called.add(part.function_call.id)
            elif part.function_response is not None:
                latest[part.function_response.id] = part.function_response

    contents: list[Content] = []
    for original, parts in kept:
        own = tuple(
            _on_wire(p, wire)
            for p in parts
            if p.function_response is None or p.function_response.id not in called
        )
        if own:
            contents.append(Content(role=original.role, parts=own))
        answers = tuple(
            _on_wire(Part(function_response=latest[p.function_call.id]), wire)
            for p in parts
            if p.function_call is not None and p.function_call.id in latest
        )
        if answers:
            contents.append(Content(role="user", parts=answers))
    return contents
