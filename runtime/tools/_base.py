"""The tool protocols: a small public ``Tool`` and one protocol per optional capability.

A tool is anything with a ``name``, a ``description`` and ``is_long_running``. What the runtime can
do with it depends on which capability protocols it also satisfies; all are runtime-checkable, so
the runtime asks ``isinstance(tool, FunctionToolLike)`` instead of demanding a base class.
``RequestProcessor``, the capability of editing the model request, lives beside the request in
``_model_request``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, runtime_checkable

from runtime._context import ToolContext
from runtime.declarations import FunctionDeclaration

__all__ = [
    "ConfirmationGate",
    "FunctionToolLike",
    "ResponseDeferrer",
    "SkipSummarizationResultDisplayer",
    "StreamingTool",
    "Tool",
    "is_idempotent",
    "requires_confirmation",
]


@runtime_checkable
class Tool(Protocol):
    """The public surface every tool has."""

    @property
    def name(self) -> str:
        """Unique name within one request; what the model calls."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def is_long_running(self) -> bool:
        """The response may arrive later, as a separate event."""
        ...


@runtime_checkable
class FunctionToolLike(Tool, Protocol):
    """A tool the model can call and the runtime can run locally."""

    def declaration(self) -> FunctionDeclaration:
        """Return what the model sees; its ``name`` equals the tool's ``name``."""
        ...

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Run with the model's arguments; return a JSON mapping, or ``None`` for no response yet.

        May raise ``InvalidToolArgumentsError``, ``ToolValidationRefused`` or
        ``ConfirmationRequired``; any other exception is an execution failure.
        """
        ...


@runtime_checkable
class StreamingTool(Tool, Protocol):
    """A tool that produces its result as a stream of text chunks."""

    def run_stream(self, ctx: ToolContext, args: dict[str, Any]) -> AsyncIterator[str]:
        """Yield text chunks; the runtime joins them into ``{"result": text}`` outside live mode."""
        ...


@runtime_checkable
class ResponseDeferrer(Protocol):
    """A tool whose ``None`` result means "no response now" (it arrives later as an event)."""

    def defers_response(self) -> bool:
        """True when a ``None`` result must not produce a function response."""
        ...


@runtime_checkable
class SkipSummarizationResultDisplayer(Protocol):
    """A tool that, under skip-summarization, can show its result to the user as text."""

    def display_result(self, result: Mapping[str, Any]) -> str | None:
        """Return the text to show, or ``None`` to show nothing."""
        ...


@runtime_checkable
class ConfirmationGate(Protocol):
    """A tool that can demand a human confirmation before it runs, per call."""

    def requires_confirmation_for(self, args: Mapping[str, Any]) -> bool:
        """True when these (model-produced) arguments need a confirmation.

        May raise ``InvalidToolArgumentsError``: arguments that do not validate never reach a
        human.
        """
        ...


def requires_confirmation(tool: Tool, args: Mapping[str, Any]) -> bool:
    """Return whether ``tool`` needs a confirmation for ``args`` (False if it has no gate)."""
    if isinstance(tool, ConfirmationGate):
        return tool.requires_confirmation_for(args)
    return False


def is_idempotent(tool: Tool) -> bool:
    """Return the tool's ``idempotent`` flag; a tool that does not say is not idempotent.

    Only idempotent tools are re-run after a crash left their call started but unanswered.
    """
    return getattr(tool, "idempotent", False) is True
