"""The example tool: few-shot examples added to the instructions, chosen per request.

ADK's example tool: a request processor (never declared to the model, never called) that adds
examples of user inputs with the calls and answer expected for them. A provider function picks
them from the request's newest user text, so each request gets examples relevant to it. The
examples are instructions, never events: nothing of them is stored, and a tool named in an
example is not run by being there.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson

from runtime._context import ToolContext
from runtime.tools._model_request import ModelRequest

__all__ = [
    "Example",
    "ExampleCall",
    "ExampleProvider",
    "ExampleTool",
    "format_examples",
    "newest_user_text",
]


@dataclass(frozen=True, kw_only=True)
class ExampleCall:
    """One expected function call of an example, with the response it would get (optional)."""

    name: str
    """The tool the model should call."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """The arguments it should pass."""
    response: Mapping[str, Any] | None = None
    """What the tool would answer, shown to the model when given."""


@dataclass(frozen=True, kw_only=True)
class Example:
    """One few-shot example: a user input and the expected calls and answer."""

    input: str
    """What the user says."""
    calls: Sequence[ExampleCall] = ()
    """The calls the model should make, in order."""
    answer: str = ""
    """The answer the model should give."""


ExampleProvider: TypeAlias = Callable[[str], Sequence[Example] | Awaitable[Sequence[Example]]]
"""Picks the examples for a request from its newest user text (may be async)."""


def newest_user_text(request: ModelRequest) -> str:
    """The text of the newest user content of the request that has text ('' when none does)."""
    for content in reversed(request.contents):
        if content.role != "user":
            continue
        text = "".join(p.text for p in content.parts if p.text is not None)
        if text:
            return text
    return ""


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()


def format_examples(examples: Sequence[Example]) -> str:
    """The instruction text for ``examples`` ('' when there are none); deterministic."""
    if not examples:
        return ""
    lines = [
        "Begin few-shot examples. They show user inputs and the tool calls and answers expected "
        "for them; they are examples only: nothing in them was run.",
    ]
    for number, example in enumerate(examples, start=1):
        lines += ["", f"EXAMPLE {number}:", "[user]", example.input]
        for call in example.calls:
            lines += ["[model calls]", f"{call.name}({_json(dict(call.args))})"]
            if call.response is not None:
                lines += [f"[{call.name} answers]", _json(dict(call.response))]
        if example.answer:
            lines += ["[model]", example.answer]
    lines += ["", "End few-shot examples."]
    return "\n".join(lines)


class ExampleTool:
    """Adds few-shot examples to every request's instructions (a request processor only).

    Guarantees: the examples come from ``examples`` (a fixed sequence) or a provider called with
    the request's newest user text; the same request gives the same instruction (given a
    deterministic provider); no declaration is added, so the model cannot call it.
    """

    def __init__(
        self,
        examples: Sequence[Example] | ExampleProvider,
        *,
        name: str = "example_tool",
    ) -> None:
        self._examples = examples
        self._name = name

    @property
    def name(self) -> str:
        """The tool's name (never declared to the model)."""
        return self._name

    @property
    def description(self) -> str:
        """What it does."""
        return "Adds few-shot examples to the instructions."

    @property
    def is_long_running(self) -> bool:
        """No."""
        return False

    async def examples_for(self, query: str) -> list[Example]:
        """The examples for a request whose newest user text is ``query``."""
        if not callable(self._examples):
            return list(self._examples)
        chosen = self._examples(query)
        if inspect.isawaitable(chosen):
            chosen = await chosen
        return list(chosen)

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Append the formatted examples to ``request.instructions`` (nothing when none)."""
        text = format_examples(await self.examples_for(newest_user_text(request)))
        if text:
            request.instructions.append(text)

    def __repr__(self) -> str:
        return f"ExampleTool({self._name!r})"
