"""The loop's own request processors: instructions, contents, tools (run in that order).

Each is a ``LoopRequestProcessor``; a runner's list may append more (the replay processors).
"""

from __future__ import annotations

from runtime._contents import build_contents
from runtime._invocation import InvocationContext, LoopRequestProcessor
from runtime._protocols import InvocationAgent
from runtime.tools import ModelRequest, RequestProcessor, Tool, Toolset, build_tool_request

__all__ = [
    "ContentsProcessor",
    "InstructionsProcessor",
    "ToolsProcessor",
    "default_request_processors",
]


class InstructionsProcessor:
    """Appends the agent's instruction (static or provided per request) when it is not empty."""

    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        """Append the instruction to ``request.instructions``."""
        text = await ctx.agent.resolve_instruction(await ctx.readonly_context())
        if text:
            request.instructions.append(text)


class ContentsProcessor:
    """Sets ``request.contents`` from the session's log (see ``build_contents``): the newest
    compaction's summary, then the events after its range (docs/compaction.md); the whole log
    when the session has no compaction."""

    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        """Replace the contents with the ones rebuilt from ``ctx.request_events()``."""
        compaction, events = await ctx.request_events()
        contents = build_contents(events, branch=ctx.branch)
        record = compaction.actions.compaction if compaction is not None else None
        request.contents = [record.summary, *contents] if record is not None else contents


class ToolsProcessor:
    """Packs the agent's tools and toolsets (declarations + execution table) and runs the tools'
    own request processing; duplicate names raise ``ToolDefinitionError``.

    An agent with only plain function tools (no toolsets, no tool with its own request
    processing) packs to the same result on every request; that packing is kept per agent and
    copied, which is the same request without re-checking every tool's capabilities.
    """

    def __init__(self) -> None:
        self._static: dict[int, tuple[InvocationAgent, ModelRequest | None]] = {}

    async def _template(self, ctx: InvocationContext) -> ModelRequest | None:
        agent = ctx.agent
        known = self._static.get(id(agent))
        if known is not None and known[0] is agent:
            return known[1]
        template: ModelRequest | None = None
        if not agent.toolsets and not any(isinstance(t, RequestProcessor) for t in agent.tools):
            template = await build_tool_request(agent.tools, await ctx.readonly_context())
        self._static[id(agent)] = (agent, template)
        return template

    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        """Pack tools into ``request`` and record the execution table on ``ctx``."""
        template = await self._template(ctx) if not request.tools_by_name else None
        if template is not None:
            request.declarations.extend(template.declarations)
            request.tools_by_name.update(template.tools_by_name)
            request.tool_sources.update(template.tool_sources)
        else:
            items: list[Tool | Toolset] = [*ctx.agent.tools, *ctx.agent.toolsets]
            await build_tool_request(items, await ctx.readonly_context(), request=request)
        ctx.remember_tools(request.tools_by_name)


def default_request_processors() -> list[LoopRequestProcessor]:
    """Return the loop's processors in order: instructions, contents, tools (a new list)."""
    return [InstructionsProcessor(), ContentsProcessor(), ToolsProcessor()]
