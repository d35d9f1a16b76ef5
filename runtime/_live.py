"""Streaming tools in the live loop (seed 000, streaming section).

With ``Runner(live=True)`` a call of a ``StreamingTool`` does not wait for its stream:

- **Start.** The call is answered at once with a pending response (``stream_started_response``:
  ``{"status": "pending", "streaming": true, …}``), stored in the step's response event like
  any answer. The stream runs in a task of the invocation.
- **Chunks** are never stored. Each reaches the caller's event stream (``run_events``) as it
  arrives, as a *partial* event (``seq`` ``None``) whose text is ``Function <name> returned:
  <chunk>`` and whose ``custom_metadata[LIVE_CHUNK_KEY]`` holds ``{call_id, tool, text}``; and,
  when the model implements ``LiveInputModel``, the model gets the same content as live input.
- **Stop.** While a stream runs, every request declares ``stop_streaming(function_name)``; the
  model's call stops every running stream of that tool. The call and its response are logged
  like any call.
- **End.** When a stream ends — completed, failed, stopped by the model, cancelled because the
  caller stopped the invocation, or still running when the invocation ends — an event is
  appended with ``custom_metadata[LIVE_STREAM_ENDED_KEY] = {call_id, tool, reason, chunks,
  error}`` and no content (``StreamEndReason``). The invocation ends once the model answered
  and every stream ended; ``Runner(live_wait=…)`` bounds how long it waits for streams still
  running, then stops them (reason ``invocation_ended``).
- **Restart.** A stream never outlives its process and is never resumed: a live invocation
  first appends an ended event (reason ``interrupted``) for every stream the log shows started
  and not ended, so a restart reports it as ended instead of silently dropping it.
- **Callbacks.** As in ADK's live branch, starting a stream bypasses the before/after tool
  callbacks (they see neither the pending response nor the chunks); ``stop_streaming`` is an
  ordinary call and goes through them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from eventstore import Content, Event, FunctionCall, Part
from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError, SessionConflictError
from runtime._invocation import InvocationContext
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema
from runtime.replay._log import LIVE_STREAM_ENDED_KEY
from runtime.tools import (
    CallOutcome,
    ModelRequest,
    StreamingTool,
    ToolErrorKind,
    error_response,
    pack_tool,
)

__all__ = [
    "LIVE_CHUNK_KEY",
    "LIVE_STREAM_ENDED_KEY",
    "STOP_STREAMING",
    "LiveInputModel",
    "LiveStreams",
    "StreamEndReason",
    "drive_live",
    "ended_payload",
    "is_stream_started",
    "open_streams",
    "stream_started_response",
]

LIVE_CHUNK_KEY = "live_chunk"
"""``custom_metadata`` key of a (never stored) live chunk event."""
STOP_STREAMING = "stop_streaming"
"""The function the runtime declares while a live stream runs."""

StreamEndReason: TypeAlias = Literal[
    "completed", "failed", "stopped", "cancelled", "invocation_ended", "interrupted"
]
"""Why a live stream ended: it finished; it raised; the model called ``stop_streaming``; the
caller stopped the invocation; the invocation ended while it ran; its process went away (found
by a later live invocation)."""


@runtime_checkable
class LiveInputModel(Protocol):
    """A model adapter that accepts input while it works (e.g. a live/realtime session)."""

    async def send_live_input(self, content: Content) -> None:
        """Deliver ``content`` (a live tool chunk, role ``user``) to the model now."""
        ...


def stream_started_response(tool_name: str) -> dict[str, Any]:
    """The pending response stored when a live stream starts."""
    return {
        "status": "pending",
        "streaming": True,
        "message": (
            f"{tool_name} is streaming; its output arrives as live input. Call "
            f"{STOP_STREAMING}(function_name={tool_name!r}) to stop it."
        ),
    }


def is_stream_started(response: Mapping[str, Any] | None) -> bool:
    """Whether a stored function response is a live stream's pending response."""
    if not response:
        return False
    return response.get("streaming") is True and response.get("status") == "pending"


def open_streams(events: list[Event]) -> list[tuple[str, str]]:
    """``(call_id, tool)`` of every stream the log shows started and not ended, in log order."""
    started: dict[str, str] = {}
    for event in events:
        for answer in event.function_responses():
            if is_stream_started(answer.response):
                started[answer.id] = answer.name
        ended = event.custom_metadata.get(LIVE_STREAM_ENDED_KEY) if event.custom_metadata else None
        if isinstance(ended, Mapping):
            started.pop(str(ended.get("call_id")), None)
    return list(started.items())


@dataclass(frozen=True, kw_only=True)
class _Chunk:
    call_id: str
    tool: str
    text: str


@dataclass(kw_only=True)
class _Stream:
    call_id: str
    tool: str
    ctx: ToolContext
    task: asyncio.Task[None] | None = None
    chunks: int = 0
    reason: StreamEndReason | None = None
    error: str | None = None


@dataclass(kw_only=True)
class LiveStreams:
    """The live streams of one invocation.

    Guarantees: chunks of one call are queued in the order the tool yielded them; once a stream
    is stopped or cancelled no more of its chunks are queued; every stream started ends exactly
    once, with one reason, and is handed out once by ``take_ended``.
    """

    agent_name: str
    """The agent whose invocation this is (author of the chunk events)."""
    invocation_id: str
    """Set on the chunk events."""
    branch: str | None = None
    """Set on the chunk events."""
    model: object = None
    """Receives chunks as live input when it is a ``LiveInputModel``."""
    _queue: asyncio.Queue[_Chunk | _Stream | Event] = field(default_factory=asyncio.Queue)
    _active: dict[str, _Stream] = field(default_factory=dict)
    _ended: list[_Stream] = field(default_factory=list)

    @property
    def active_tools(self) -> list[str]:
        """Names of the tools streaming now, each once, in start order."""
        return list(dict.fromkeys(s.tool for s in self._active.values()))

    def start(self, call: FunctionCall, tool: StreamingTool, ctx: ToolContext) -> CallOutcome:
        """Start streaming ``call`` and return its pending outcome (an error outcome, and no
        stream, when the arguments do not validate)."""
        try:
            stream = tool.run_stream(ctx, dict(call.args))
        except InvalidToolArgumentsError as exc:
            kind = ToolErrorKind.INVALID_ARGUMENTS
            return CallOutcome(
                call_id=call.id,
                tool_name=call.name,
                args=dict(call.args),
                response=error_response(kind, tool=call.name, message=str(exc)),
                actions=ctx.actions.to_event_actions(),
                error_kind=kind,
                exception=exc,
            )
        running = _Stream(call_id=call.id, tool=call.name, ctx=ctx)
        running.task = asyncio.get_running_loop().create_task(self._pump(running, stream))
        self._active[call.id] = running
        return CallOutcome(
            call_id=call.id,
            tool_name=call.name,
            args=dict(call.args),
            response=stream_started_response(call.name),
            actions=ctx.actions.to_event_actions(),
        )

    def _content(self, tool: str, text: str) -> Content:
        return Content(role="user", parts=(Part(text=f"Function {tool} returned: {text}"),))

    async def _pump(self, running: _Stream, stream: AsyncIterator[str]) -> None:
        try:
            async for text in stream:
                if running.reason is not None:
                    break
                running.chunks += 1
                self._queue.put_nowait(
                    _Chunk(call_id=running.call_id, tool=running.tool, text=text)
                )
                if isinstance(self.model, LiveInputModel):
                    await self.model.send_live_input(self._content(running.tool, text))
            if running.reason is None:
                running.reason = "completed"
        except asyncio.CancelledError:
            if running.reason is None:
                running.reason = "cancelled"
        except Exception as exc:  # a stream's failure ends only that stream
            running.reason, running.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await aclose()
            self._queue.put_nowait(running)

    def _end(self, call_id: str, reason: StreamEndReason) -> bool:
        running = self._active.get(call_id)
        if running is None or running.reason is not None:
            return False
        running.reason = reason
        running.ctx.cancel_event.set()
        if running.task is not None:
            running.task.cancel()
        return True

    def stop(self, function_name: str) -> list[str]:
        """Stop every running stream of ``function_name``; return their call ids."""
        ids = [cid for cid, s in self._active.items() if s.tool == function_name]
        return [cid for cid in ids if self._end(cid, "stopped")]

    def end_all(self, reason: StreamEndReason) -> None:
        """Stop every running stream with ``reason``."""
        for call_id in list(self._active):
            self._end(call_id, reason)

    def _chunk_event(self, chunk: _Chunk) -> Event:
        return Event(
            author=self.agent_name,
            invocation_id=self.invocation_id,
            branch=self.branch,
            partial=True,
            content=self._content(chunk.tool, chunk.text),
            custom_metadata={
                LIVE_CHUNK_KEY: {"call_id": chunk.call_id, "tool": chunk.tool, "text": chunk.text}
            },
        )

    def forward(self, event: Event) -> None:
        """Queue an event a tool emitted, for the caller's stream (never stored)."""
        self._queue.put_nowait(event)

    def _handle(self, item: _Chunk | _Stream | Event) -> Event | None:
        if isinstance(item, Event):
            return item
        if isinstance(item, _Stream):
            self._active.pop(item.call_id, None)
            self._ended.append(item)
            return None
        running = self._active.get(item.call_id)
        if running is None or running.reason in ("stopped", "cancelled", "invocation_ended"):
            return None  # stopped: nothing of it reaches the caller after the stop
        return self._chunk_event(item)

    def take_chunks(self) -> list[Event]:
        """The chunk events queued now (no waiting), in arrival order."""
        events: list[Event] = []
        while not self._queue.empty():
            event = self._handle(self._queue.get_nowait())
            if event is not None:
                events.append(event)
        return events

    async def next_chunk(self) -> Event | None:
        """Wait for the next chunk event; ``None`` when a stream ended instead."""
        return self._handle(await self._queue.get())

    @property
    def idle(self) -> bool:
        """No stream is running and nothing is queued."""
        return not self._active and self._queue.empty()

    def take_ended(self) -> list[dict[str, Any]]:
        """The ``LIVE_STREAM_ENDED_KEY`` payloads of the streams that ended since the last call."""
        ended, self._ended = self._ended, []
        return [
            ended_payload(
                s.call_id, s.tool, s.reason or "cancelled", chunks=s.chunks, error=s.error
            )
            for s in ended
        ]

    async def wait_stopped(self) -> None:
        """Wait until every stream task has finished (after ``end_all``)."""
        tasks = [s.task for s in self._active.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        self.take_chunks()

    def process_request(self, request: ModelRequest) -> None:
        """Declare ``stop_streaming`` on ``request`` while a stream runs."""
        if self._active and STOP_STREAMING not in request.tools_by_name:
            pack_tool(request, StopStreamingTool(self), source="the live runtime")


def ended_payload(
    call_id: str,
    tool: str,
    reason: StreamEndReason,
    *,
    chunks: int = 0,
    error: str | None = None,
) -> dict[str, Any]:
    """What an ended event carries under ``LIVE_STREAM_ENDED_KEY``."""
    return {"call_id": call_id, "tool": tool, "reason": reason, "chunks": chunks, "error": error}


class StopStreamingTool:
    """``stop_streaming(function_name)``: stops every running live stream of that tool."""

    def __init__(self, streams: LiveStreams) -> None:
        self._streams = streams

    @property
    def name(self) -> str:
        """``stop_streaming``."""
        return STOP_STREAMING

    @property
    def description(self) -> str:
        """What the model reads."""
        return "Stop the live stream(s) of a streaming function that is running."

    @property
    def is_long_running(self) -> bool:
        """No."""
        return False

    def declaration(self) -> FunctionDeclaration:
        """One required parameter, ``function_name``, one of the tools streaming now."""
        return declaration_from_json_schema(
            STOP_STREAMING,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {
                    "function_name": {
                        "type": "string",
                        "enum": self._streams.active_tools,
                        "description": "The streaming function to stop.",
                    }
                },
                "required": ["function_name"],
            },
        )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        """Stop the streams; answer ``{"stopped_call_ids": [...]}`` (raises when none runs)."""
        name = args.get("function_name")
        if not isinstance(name, str):
            raise InvalidToolArgumentsError(
                STOP_STREAMING, errors=["function_name: must be a string"]
            )
        stopped = self._streams.stop(name)
        if not stopped:
            raise InvalidToolArgumentsError(
                STOP_STREAMING, errors=[f"function_name: no stream of {name!r} is running"]
            )
        return {"stopped_call_ids": stopped}


_DONE = object()


async def _record_ended(ctx: InvocationContext, streams: LiveStreams) -> list[Event]:
    payloads = streams.take_ended()
    if payloads:
        await ctx.append(
            *(ctx.new_event(custom_metadata={LIVE_STREAM_ENDED_KEY: p}) for p in payloads)
        )
    return ctx.take_unreported()


_END_ATTEMPTS = 8
"""Appends of the ended events at the head before the conflict is raised (each conflict is
another writer's successful append)."""


async def _record_ended_at_head(ctx: InvocationContext, streams: LiveStreams) -> None:
    """Append the ended events of an invocation that was stopped, at the session's head.

    The stop may have cancelled an append that reached the store while the invocation never
    learned its ``seq`` (its version is stale then), and the streams' ends are facts that
    depend on nothing after them: so re-read the head and append there. Raises the conflict
    after ``_END_ATTEMPTS`` tries, and whatever the store raises.
    """
    payloads = streams.take_ended()
    if not payloads:
        return
    events = [ctx.new_event(custom_metadata={LIVE_STREAM_ENDED_KEY: p}) for p in payloads]
    for attempt in range(_END_ATTEMPTS):
        await ctx.refresh()
        try:
            await ctx.append(*events)
        except SessionConflictError:
            if attempt == _END_ATTEMPTS - 1:
                raise
            continue
        return


async def drive_live(
    ctx: InvocationContext,
    loop: Callable[[LiveStreams], AsyncGenerator[Event, None]],
    *,
    model: object,
    wait: float | None,
) -> AsyncGenerator[Event, None]:
    """Run the invocation ``loop`` (given the invocation's ``LiveStreams``) in live mode.

    Yields the loop's events, and each chunk event as it arrives, even while the loop waits
    for the model or a tool; appends ended events only between the loop's steps (never during
    one), then, once the loop is done, waits for the streams still running (at most ``wait``
    seconds, then stops them) and appends their ended events. On an early stop (the caller
    stops iterating, or cancels) every stream is cancelled and its end appended at the
    session's head (re-read: the stop may have cut off the invocation's view of its own last
    append). An end that cannot be appended is raised to a caller that stopped iterating, and
    added as a note to an error or cancellation already on its way out; the next live
    invocation then reports the stream as interrupted.
    """
    streams = LiveStreams(
        agent_name=ctx.agent.name, invocation_id=ctx.invocation_id, branch=ctx.branch, model=model
    )
    ctx.event_sink = streams.forward
    orphans = open_streams(await ctx.events())
    if orphans:
        await ctx.append(
            *(
                ctx.new_event(
                    custom_metadata={
                        LIVE_STREAM_ENDED_KEY: ended_payload(call_id, tool, "interrupted")
                    }
                )
                for call_id, tool in orphans
            )
        )
        for event in ctx.take_unreported():
            yield event
    inner = loop(streams)
    next_task: asyncio.Future[Any] | None = None
    chunk_task: asyncio.Future[Event | None] | None = None
    finished = False
    stopping: BaseException | None = None
    try:
        while True:
            next_task = asyncio.ensure_future(anext(inner, _DONE))
            while not next_task.done():
                if chunk_task is None:
                    chunk_task = asyncio.ensure_future(streams.next_chunk())
                await asyncio.wait({next_task, chunk_task}, return_when=asyncio.FIRST_COMPLETED)
                if chunk_task.done():
                    chunk, chunk_task = chunk_task.result(), None
                    if chunk is not None:
                        yield chunk
            produced = next_task.result()
            next_task = None
            # What arrived during the step comes before the step's own events.
            if chunk_task is not None and chunk_task.done():
                chunk, chunk_task = chunk_task.result(), None
                if chunk is not None:
                    yield chunk
            for chunk in streams.take_chunks():
                yield chunk
            if produced is _DONE:
                break
            yield produced
            for event in await _record_ended(ctx, streams):  # the loop is between steps
                yield event
        deadline = None if wait is None else asyncio.get_running_loop().time() + wait
        while True:
            if chunk_task is not None and chunk_task.done():
                chunk, chunk_task = chunk_task.result(), None
                if chunk is not None:
                    yield chunk
                for event in await _record_ended(ctx, streams):
                    yield event
                continue
            if streams.idle:
                break
            if chunk_task is None:
                chunk_task = asyncio.ensure_future(streams.next_chunk())
            timeout = None
            if deadline is not None:
                timeout = max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.wait({chunk_task}, timeout=timeout)
            if not chunk_task.done():
                streams.end_all("invocation_ended")
                deadline = None
        for event in await _record_ended(ctx, streams):
            yield event
        finished = True
    except BaseException as exc:
        stopping = exc
        raise
    finally:
        if chunk_task is not None:
            chunk_task.cancel()
        if next_task is not None and not next_task.done():
            next_task.cancel()
            with contextlib.suppress(BaseException):
                await next_task
        if not finished:
            with contextlib.suppress(Exception):
                await inner.aclose()
            streams.end_all("cancelled")
            try:
                await streams.wait_stopped()
                await _record_ended_at_head(ctx, streams)
            except Exception as failure:
                # Reported, never swallowed: the caller that stopped the stream (GeneratorExit)
                # gets the failure itself; an error or cancellation already on its way out
                # carries it as a note. A later live invocation still reports the stream ended.
                if stopping is None or isinstance(stopping, GeneratorExit):
                    raise
                stopping.add_note(
                    f"The end of the live stream(s) of invocation {ctx.invocation_id!r} could "
                    f"not be appended to session {ctx.session_id!r}: "
                    f"{type(failure).__name__}: {failure}"
                )
