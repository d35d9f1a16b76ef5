"""Builders for hand-written histories in the docs/protocol.md shapes (tests only)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

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

AGENT = "weather_agent"
PLACEHOLDER = {"error": {"kind": "confirmation_required", "message": "waits for a human"}}
"""The response a call gets while it waits for a confirmation (docs/protocol.md §5)."""
_ids = itertools.count(1)


def call(name: str, call_id: str | None = None, **args: Any) -> FunctionCall:
    return FunctionCall(id=call_id or f"call-{next(_ids)}", name=name, args=dict(args))


class History:
    """An in-memory log: events get seq 1, 2, 3 … as they are added."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, event: Event) -> Event:
        stored = dataclasses.replace(event, seq=len(self.events) + 1, timestamp=1.0)
        self.events.append(stored)
        return stored

    def newest_first(self) -> list[Event]:
        return list(reversed(self.events))

    def counted(self) -> tuple[Iterator[Event], list[int]]:
        """Return a newest-first iterator and a one-item list counting what it yielded."""
        seen = [0]

        def gen() -> Iterator[Event]:
            for event in reversed(self.events):
                seen[0] += 1
                yield event

        return gen(), seen

    # -- the shapes ----------------------------------------------------------------------------

    def user(self, text: str) -> Event:
        return self.add(
            Event(author="user", content=Content(role="user", parts=(Part(text=text),)))
        )

    def model(
        self,
        *calls: FunctionCall,
        agent: str = AGENT,
        long_running: tuple[str, ...] = (),
        text: str | None = None,
    ) -> Event:
        parts = tuple(Part(function_call=c) for c in calls)
        if text is not None:
            parts = (Part(text=text), *parts)
        return self.add(
            Event(
                author=agent,
                content=Content(role="model", parts=parts),
                long_running_tool_ids=long_running,
                turn_complete=True,
            )
        )

    def claim(self, *call_ids: str, agent: str = AGENT) -> Event:
        return self.add(Event(author=agent, started_call_ids=call_ids))

    def respond(
        self,
        *pairs: tuple[FunctionCall, dict[str, Any]],
        agent: str = AGENT,
        confirmations: dict[str, ToolConfirmation] | None = None,
    ) -> Event:
        parts = tuple(
            Part(function_response=FunctionResponse(id=c.id, name=c.name, response=r))
            for c, r in pairs
        )
        actions = EventActions(
            requested_tool_confirmations=confirmations or {}, skip_summarization=bool(confirmations)
        )
        return self.add(
            Event(author=agent, content=Content(role="user", parts=parts), actions=actions)
        )

    def request(
        self, original: FunctionCall, cid: str, *, agent: str = AGENT, hint: str = "pay?"
    ) -> Event:
        args = {
            "originalFunctionCall": {
                "id": original.id,
                "name": original.name,
                "args": original.args,
            },
            "toolConfirmation": {"hint": hint, "confirmed": False, "payload": None},
        }
        return self.add(
            Event(
                author=agent,
                content=Content(
                    role="model",
                    parts=(
                        Part(
                            function_call=FunctionCall(
                                id=cid, name=REQUEST_CONFIRMATION_FUNCTION, args=args
                            )
                        ),
                    ),
                ),
                long_running_tool_ids=(cid,),
            )
        )

    def answer(
        self,
        cid: str,
        confirmed: Any = True,
        *,
        payload: Any = None,
        raw: dict[str, Any] | None = None,
        author: str = "user",
    ) -> Event:
        response = raw if raw is not None else {"confirmed": confirmed, "payload": payload}
        part = Part(
            function_response=FunctionResponse(
                id=cid, name=REQUEST_CONFIRMATION_FUNCTION, response=response
            )
        )
        return self.add(Event(author=author, content=Content(role="user", parts=(part,))))

    def result(
        self, original: FunctionCall, response: dict[str, Any], author: str = "user"
    ) -> Event:
        part = Part(
            function_response=FunctionResponse(
                id=original.id, name=original.name, response=response
            )
        )
        return self.add(Event(author=author, content=Content(role="user", parts=(part,))))

    def needs_confirmation(self, original: FunctionCall, cid: str, *, agent: str = AGENT) -> None:
        """Model call → claim → confirmation_required error response → request (§2 to §5)."""
        self.model(original, agent=agent)
        self.claim(original.id, agent=agent)
        self.respond(
            (
                original,
                {
                    "error": {
                        "kind": "confirmation_required",
                        "tool": original.name,
                        "message": "needs confirmation",
                    }
                },
            ),
            agent=agent,
            confirmations={original.id: ToolConfirmation(hint="pay?")},
        )
        self.request(original, cid, agent=agent)
