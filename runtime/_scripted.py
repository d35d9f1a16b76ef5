"""``ScriptedModel``: a fake model that replays given responses, for tests and demos."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

from runtime._exceptions import ScriptExhaustedError
from runtime._model import ModelResponse
from runtime.tools import ModelRequest

__all__ = ["ScriptStep", "ScriptedModel"]

ScriptStep: TypeAlias = (
    ModelResponse | str | Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
)
"""One scripted turn: a response, a plain text (a final answer), or a function of the request."""


class ScriptedModel:
    """A model that returns scripted responses in order and records every request it saw.

    Guarantees: the n-th call returns the n-th step (a ``str`` becomes a text-only response, a
    callable is called with the request); ``requests`` holds a copy of each request as it was
    when the model was called, so later edits do not change the record; a call beyond the script
    raises ``ScriptExhaustedError`` naming the call number.
    """

    def __init__(self, responses: Iterable[ScriptStep]) -> None:
        self._script: list[ScriptStep] = list(responses)
        self.requests: list[ModelRequest] = []
        """Every request this model was called with, oldest first."""

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        return len(self._script) - len(self.requests)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the next scripted response; raises ``ScriptExhaustedError`` when none is left."""
        # Shallow-copy the lists so later edits to the live request do not rewrite history;
        # the elements (contents, declarations, tools) are immutable or shared on purpose.
        self.requests.append(copy.copy(request))
        recorded = self.requests[-1]
        recorded.instructions = list(request.instructions)
        recorded.contents = list(request.contents)
        recorded.declarations = list(request.declarations)
        recorded.tools_by_name = dict(request.tools_by_name)
        index = len(self.requests) - 1
        if index >= len(self._script):
            raise ScriptExhaustedError(calls=index + 1, scripted=len(self._script))
        step = self._script[index]
        if isinstance(step, ModelResponse):
            return step
        if isinstance(step, str):
            return ModelResponse(text=step)
        produced = step(request)
        if isinstance(produced, ModelResponse):
            return produced
        return await produced

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self._script)} responses, {len(self.requests)} used)"
