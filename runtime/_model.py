"""The model protocol: what the loop sends to a model and what it expects back.

The request type is the tools layer's ``ModelRequest`` (instructions, contents rebuilt from the
log, declarations and the local execution table); this module adds the response and the protocol a
model adapter implements.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from eventstore import Content, FunctionCall, Part
from runtime.tools import ModelRequest

__all__ = ["Model", "ModelRequest", "ModelResponse", "StreamingModel", "new_call_id"]


def new_call_id() -> str:
    """Return a fresh function call id, ``call-<uuid4 hex>``."""
    return f"call-{uuid.uuid4().hex}"


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    """One model turn: text and/or function calls.

    Guarantees: every call in ``function_calls`` has a non-empty id — calls the model gave without
    one get ``call-<uuid hex>`` when the response is built. Ids are the model's and may repeat
    (some servers number each response's calls ``call_0``, ``call_1`` …); the runner stores
    calls under ids unique in the session and sends the model's ids back (``_call_ids``).
    """

    text: str = ""
    """The model's text (may be empty when it only calls tools)."""
    function_calls: tuple[FunctionCall, ...] = ()
    """The calls, in the order the model emitted them."""
    custom_metadata: dict[str, Any] = field(default_factory=dict)
    """Provider data worth keeping in the log (usage, finish reason); never sent back."""

    def __post_init__(self) -> None:
        fixed = tuple(
            call if call.id else FunctionCall(id=new_call_id(), name=call.name, args=call.args)
            for call in self.function_calls
        )
        object.__setattr__(self, "function_calls", fixed)

    @classmethod
    def calling(
        cls, *calls: tuple[str, Mapping[str, Any]] | FunctionCall, text: str = ""
    ) -> ModelResponse:
        """Build a response that calls tools: ``ModelResponse.calling(("get_weather", {...}))``.

        A ``(name, args)`` pair gets a generated id; a ``FunctionCall`` keeps its own.
        """
        built = [
            c if isinstance(c, FunctionCall) else FunctionCall(id="", name=c[0], args=dict(c[1]))
            for c in calls
        ]
        return cls(text=text, function_calls=tuple(built))

    def content(self) -> Content:
        """Return the model content to store: the text part (if any) then one part per call."""
        parts: list[Part] = []
        if self.text:
            parts.append(Part(text=self.text))
        parts.extend(Part(function_call=call) for call in self.function_calls)
        return Content(role="model", parts=tuple(parts))

    @classmethod
    def from_content(cls, content: Content) -> ModelResponse:
        """Rebuild a response from a stored model content (text parts joined, calls in order)."""
        text = "".join(p.text for p in content.parts if p.text is not None)
        calls: Iterable[FunctionCall] = (
            p.function_call for p in content.parts if p.function_call is not None
        )
        return cls(text=text, function_calls=tuple(calls))


@runtime_checkable
class Model(Protocol):
    """A language model behind one async call.

    ``generate`` must not modify the request it is given. Exceptions propagate out of the
    invocation unchanged (the loop appends nothing for a failed model call).
    """

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next turn for ``request``."""
        ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its turn's text as it is generated (for chat UIs).

    ``generate_stream`` yields text deltas (``str``) in order, then exactly one
    ``ModelResponse``: the whole turn, whose text is the deltas joined. Only that response is
    stored; the deltas reach ``Runner.run_events(stream_text=True)`` as partial events, never the
    log. Errors are raised as from ``generate``.
    """

    def generate_stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield the text deltas of the next turn, then the turn itself."""
        ...
