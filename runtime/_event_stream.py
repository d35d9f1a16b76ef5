"""How an invocation's events reach its caller: as they are appended, tool-emitted ones as
they are emitted, and the plugins' ``after_invocation`` hooks however the invocation ends.

The runner's loop is an async generator of the events it appends; ``with_emitted`` interleaves
the events tools emit (never stored: a child agent's forwarded events, ``emit_event``) while a
step still runs, and ``observed`` runs the hooks after the last event, on early stops and
errors too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from eventstore import Event
from runtime._invocation import InvocationContext
from runtime._plugins import Plugin, observing

__all__ = ["observed", "with_emitted"]

_DONE = object()


def observed(
    ctx: InvocationContext, plugins: Sequence[Plugin], events: AsyncGenerator[Event, None]
) -> AsyncGenerator[Event, None]:
    """``events``, then the plugins' ``after_invocation`` hooks however the invocation ended."""
    watchers = observing(plugins, "after_invocation")
    if not watchers:
        return events
    return _then_hooks(ctx, events, watchers)


async def _then_hooks(
    ctx: InvocationContext, events: AsyncGenerator[Event, None], watchers: tuple[Plugin, ...]
) -> AsyncGenerator[Event, None]:
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                yield event
    finally:
        for plugin in watchers:
            await plugin.after_invocation(ctx)


async def with_emitted(
    ctx: InvocationContext, loop: AsyncGenerator[Event, None]
) -> AsyncGenerator[Event, None]:
    """The loop's events, and the events tools emit (never stored) as they are emitted.

    The loop runs its next step in a task so that an event a tool emits while the step still
    runs (a child agent's event, ``emit_event``) reaches the caller then, not when the step
    ends; what was emitted during a step comes before the step's own events. Stopping early or
    cancelling cancels the running step and waits for it (tools stop as on any cancellation).
    """
    emitted: collections.deque[Event] = collections.deque()
    arrived = asyncio.Event()

    def sink(event: Event) -> None:
        emitted.append(event)
        arrived.set()

    ctx.event_sink = sink
    async with contextlib.aclosing(loop):
        while True:
            step: asyncio.Future[Any] = asyncio.ensure_future(anext(loop, _DONE))
            try:
                while not step.done():
                    if not emitted:
                        arrived.clear()
                        waiter = asyncio.ensure_future(arrived.wait())
                        try:
                            await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            waiter.cancel()
                    while emitted:
                        yield emitted.popleft()
            finally:
                if not step.done():
                    step.cancel()
                    await _settle(step)
            produced = step.result()
            while emitted:
                yield emitted.popleft()
            if produced is _DONE:
                return
            yield produced


async def _settle(task: asyncio.Future[Any]) -> None:
    """Wait until a cancelled ``task`` has finished, even when this task is cancelled meanwhile
    (that cancellation is raised once it has)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError

