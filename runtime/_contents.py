"""History → model contents: what the model sees of the session's log.

A pure function of the events (replay determinism): the same log always gives the same contents.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Content, Event, FunctionResponse, Part

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


def build_contents(events: Sequence[Event], *, branch: str | None = None) -> list[Content]:
    """Return the contents to send for ``events`` (oldest first).

    Rules: events without content, partial events and events of other branches are skipped;
    confirmation-request calls and their answers are runtime plumbing and are left out; every
    function response is placed right after the model content that made its call — all
    responses to one model turn in one ``user`` content, in call order — and when a call was
    answered more than once (a confirmation error, then the confirmed result) the newest answer is
    the one sent. A response whose call is not in the history stays where it is.
    """
    kept: list[tuple[Content, tuple[Part, ...]]] = []
    latest: dict[str, FunctionResponse] = {}
    called: set[str] = set()
    for event in events:
        if event.content is None or event.partial or not visible_on_branch(event, branch):
            continue
        parts = tuple(p for p in event.content.parts if _model_visible(p))
        if not parts:
            continue
        kept.append((event.content, parts))
        for part in parts:
            if part.function_call is not None:
                called.add(part.function_call.id)
            elif part.function_response is not None:
                latest[part.function_response.id] = part.function_response

    contents: list[Content] = []
    for original, parts in kept:
        own = tuple(
            p for p in parts if p.function_response is None or p.function_response.id not in called
        )
        if own:
            contents.append(Content(role=original.role, parts=own))
        answers = tuple(
            Part(function_response=latest[p.function_call.id])
            for p in parts
            if p.function_call is not None and p.function_call.id in latest
        )
        if answers:
            contents.append(Content(role="user", parts=answers))
    return contents
