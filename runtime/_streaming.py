"""Streaming tools: joined into one response in the loop, streamed chunk by chunk in live mode.

Live chunks are not events: nothing of a live stream is stored, and a stream does not survive
its process (a restarted process does not resume a ``run_stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from eventstore import FunctionCall
from runtime._context import ArtifactService, ToolContext
from runtime._exceptions import RuntimeUsageError, ToolDefinitionError
from runtime.tools import StreamingTool, Tool
from runtime.tools._function import CallableTool

__all__ = ["LiveChunk", "LiveToolStream", "StreamingFunctionTool", "streaming_tool"]


def _require_async_generator(func: Callable[..., Any], tool_name: str, qualname: str) -> None:
    if not inspect.isasyncgenfunction(func):
        raise ToolDefinitionError(
            f"{qualname!r} is not an async generator function; a streaming tool yields its chunks.",
            tool_name=tool_name,
        )


class StreamingFunctionTool(CallableTool):
    """A tool backed by an async generator function that yields text chunks.

    Guarantees: name, description, declaration and argument validation are those of function
    tools (``CallableTool``); in the normal loop ``run`` joins every chunk, without separators,
    into ``{"result": text}``; ``run_stream`` yields the chunks as produced (live mode).
    """

    def __init__(
        self,
        func: Callable[..., AsyncIterator[str]],
        *,
        name: str | None = None,
        description: str | None = None,
        is_long_running: bool = False,
    ) -> None:
        super().__init__(
            func,
            name=name,
            description=description,
            is_long_running=is_long_running,
            check=_require_async_generator,
        )

    def run_stream(self, ctx: ToolContext, args: dict[str, Any]) -> AsyncIterator[str]:
        """Validate ``args`` and return the chunk iterator (raises on invalid arguments)."""
        stream: AsyncIterator[str] = self.func(**self._call_kwargs(ctx, args))
        return stream

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        """Consume the whole stream and return ``{"result": <chunks joined>}``."""
        chunks = [chunk async for chunk in self.run_stream(ctx, args)]
        return {"result": "".join(chunks)}


def streaming_tool(func: Callable[..., AsyncIterator[str]], /) -> StreamingFunctionTool:
    """Decorator: make a ``StreamingFunctionTool`` of an async generator function."""
    return StreamingFunctionTool(func)


@dataclass(frozen=True, kw_only=True)
class LiveChunk:
    """One chunk of a live tool stream (never stored)."""

    call_id: str
    """Id of the call that produced it."""
    tool_name: str
    """Name of the streaming tool."""
    text: str
    """The chunk."""


@dataclass(frozen=True, kw_only=True)
class _Ended:
    call_id: str
    error: BaseException | None


@dataclass(kw_only=True)
class _Active:
    tool_name: str
    ctx: ToolContext
    task: asyncio.Task[None]


class LiveToolStream:
    """Runs streaming tool calls live and yields their chunks as they come.

    Guarantees: chunks of one call arrive in the order the tool yielded them; iteration ends when
    every started call has ended; ``cancel(call_id)`` sets the call's ``ctx.cancel_event`` and
    stops consuming it (a handler that checks ``ctx.cancelled`` or awaits stops; one blocked in
    code that never awaits cannot be stopped); no chunk of a cancelled call is yielded after
    ``cancel`` returns; ``stop(tool_name)`` cancels every active call of that tool. A handler's
    exception ends only its own call and is recorded in ``errors``.
    """

    def __init__(
        self,
        *,
        tools: Sequence[Tool] | Mapping[str, Tool],
        session_id: str,
        agent_name: str = "",
        invocation_id: str = "",
        state: Mapping[str, Any] | None = None,
        artifacts: ArtifactService | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        table = dict(tools) if isinstance(tools, Mapping) else {t.name: t for t in tools}
        self._tools = table
        self._session_id = session_id
        self._agent_name = agent_name
        self._invocation_id = invocation_id
        self._state = state if state is not None else {}
        self._artifacts = artifacts
        self._app_name = app_name
        self._user_id = user_id
        self._queue: asyncio.Queue[LiveChunk | _Ended] = asyncio.Queue()
        self._active: dict[str, _Active] = {}
        self._cancelled: set[str] = set()
        self.errors: dict[str, BaseException] = {}
        """Call id -> the exception its handler raised (cancelled calls are not errors)."""

    @property
    def active_call_ids(self) -> list[str]:
        """Ids of the calls still streaming, in start order."""
        return list(self._active)

    def start(self, call: FunctionCall) -> ToolContext:
        """Start streaming ``call``; return its context. Raises ``RuntimeUsageError`` when the tool
        is unknown or not a streaming tool, or the call id is already active."""
        tool = self._tools.get(call.name)
        if not isinstance(tool, StreamingTool):
            names = sorted(n for n, t in self._tools.items() if isinstance(t, StreamingTool))
            raise RuntimeUsageError(
                f"Call {call.id!r} names {call.name!r}, which is not a streaming tool here; "
                f"streaming tools: {', '.join(names) or 'none'}."
            )
        if call.id in self._active:
            raise RuntimeUsageError(f"Call {call.id!r} is already streaming.")
        ctx = ToolContext(
            function_call_id=call.id,
            invocation_id=self._invocation_id,
            agent_name=self._agent_name,
            session_id=self._session_id,
            app_name=self._app_name,
            user_id=self._user_id,
            state=self._state,
            artifacts=self._artifacts,
        )
        task = asyncio.get_running_loop().create_task(self._pump(tool, call, ctx))
        self._active[call.id] = _Active(tool_name=call.name, ctx=ctx, task=task)
        return ctx

    async def _pump(self, tool: StreamingTool, call: FunctionCall, ctx: ToolContext) -> None:
        error: BaseException | None = None
        stream: AsyncIterator[str] | None = None
        try:
            stream = tool.run_stream(ctx, dict(call.args))
            async for chunk in stream:
                if ctx.cancelled:
                    break
                await self._queue.put(LiveChunk(call_id=call.id, tool_name=call.name, text=chunk))
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            error = exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await aclose()
            self._queue.put_nowait(_Ended(call_id=call.id, error=error))

    def cancel(self, call_id: str) -> bool:
        """Cancel one call; return False when it is not active."""
        active = self._active.get(call_id)
        if active is None or call_id in self._cancelled:
            return False
        self._cancelled.add(call_id)
        active.ctx.cancel_event.set()
        active.task.cancel()
        return True

    def stop(self, tool_name: str) -> list[str]:
        """Cancel every active call of ``tool_name``; return their ids."""
        ids = [cid for cid, a in self._active.items() if a.tool_name == tool_name]
        return [cid for cid in ids if self.cancel(cid)]

    async def __aiter__(self) -> AsyncIterator[LiveChunk]:
        while self._active:
            item = await self._queue.get()
            if isinstance(item, _Ended):
                self._active.pop(item.call_id, None)
                self._cancelled.discard(item.call_id)
                if item.error is not None:
                    self.errors[item.call_id] = item.error
            elif item.call_id not in self._cancelled:
                yield item

    async def aclose(self) -> None:
        """Cancel every active call and wait until all have ended."""
        for call_id in list(self._active):
            self.cancel(call_id)
        async for _ in self:
            pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
