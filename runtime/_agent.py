"""``Agent``: the configuration of one LLM agent (model, instruction, tools, callbacks)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from runtime._callbacks import AgentCallbacks
from runtime._compaction_config import CompactionConfig
from runtime._context import ReadonlyContext
from runtime._exceptions import RuntimeUsageError
from runtime._model import Model
from runtime._plugins import Plugin
from runtime.tools import Tool, ToolRegistry, Toolset

__all__ = ["Agent", "InstructionProvider"]

InstructionProvider: TypeAlias = Callable[[ReadonlyContext], str | Awaitable[str]]
"""Builds the instruction per request from the read-only context (state, ids)."""


@dataclass(frozen=True, kw_only=True)
class Agent:
    """An LLM agent's configuration; immutable, shareable between runners and sessions.

    Guarantees: ``name`` is a valid author name (not ``user``); ``max_steps`` is at least 1;
    explicit tool names are unique (``ToolDefinitionError`` at construction otherwise).
    The agent holds no per-session data: everything a run decides is in the event log.
    """

    name: str
    """The agent's name; the ``author`` of every event it writes."""
    model: Model
    """The model it calls."""
    instruction: str | InstructionProvider = ""
    """System instruction, or a function of the read-only context that returns it."""
    tools: Sequence[Tool] | ToolRegistry = ()
    """Tools exposed on every request, packed before the toolsets' tools (a ``ToolRegistry``
    or any sequence; stored as a tuple)."""
    toolsets: Sequence[Toolset] = ()
    """Toolsets asked for their tools on every request."""
    callbacks: AgentCallbacks = field(default_factory=AgentCallbacks)
    """Model and tool callbacks; they run after the plugins' callbacks."""
    plugins: Sequence[Plugin] = ()
    """Plugins; their callbacks run before the agent's, in order."""
    parallel_tool_calls: bool = True
    """Run the calls of one model turn concurrently (``False``: one after the other)."""
    max_steps: int = 25
    """Most model calls per invocation; then the run stops with status ``step_limit``."""
    compaction: CompactionConfig | None = None
    """When the runner compacts the session by itself after a final answer (``None``: never;
    docs/compaction.md)."""
    registry: ToolRegistry = field(init=False, repr=False, compare=False)
    """The explicit ``tools`` as a registry (lookup by name and type); built at construction."""

    def __post_init__(self) -> None:
        if not self.name or self.name == "user":
            raise RuntimeUsageError(
                f"An agent needs a non-empty name other than 'user', not {self.name!r}."
            )
        if self.max_steps < 1:
            raise RuntimeUsageError(
                f"Agent {self.name!r}: max_steps must be at least 1, not {self.max_steps}."
            )
        registry = (
            self.tools
            if isinstance(self.tools, ToolRegistry)
            else ToolRegistry(self.tools, source="agent tools")
        )
        object.__setattr__(self, "registry", registry)
        object.__setattr__(self, "tools", tuple(registry))
        object.__setattr__(self, "toolsets", tuple(self.toolsets))
        object.__setattr__(self, "plugins", tuple(self.plugins))

    async def resolve_instruction(self, readonly: ReadonlyContext) -> str:
        """Return the instruction for this request (calling the provider when there is one)."""
        if isinstance(self.instruction, str):
            return self.instruction
        produced = self.instruction(readonly)
        if inspect.isawaitable(produced):
            produced = await produced
        return produced
