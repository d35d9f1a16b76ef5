"""Benchmark the agent loop's overhead per tool call next to the store's raw append cost.

    .venv/bin/python scripts/bench_runtime.py [--quick] [--memory]

On a temporary SQLite file (``open_store(path, auto_upgrade=True)``; the in-memory store with a
note when the SQLite backend is not available or ``--memory`` is given), in the same run:

(a) raw append: one ~agent-sized event appended and awaited, ``expected_version`` checked —
    the floor every logged step pays;
(b) the loop: ``Runner.run`` on fresh sessions whose scripted model calls a no-op tool
    ``STEPS`` times (one call per step) and then answers. Per tool call the loop builds the
    request from the log (instructions, contents, tools), appends the model event, appends the
    claim, runs the tool through the pipeline and appends the response event: three appends
    plus reads. The cost per tool call is the invocation's time divided by ``STEPS`` (the user
    message and the final answer are included, amortized).

Prints both, and the ratio loop-per-tool-call / raw-append. Best of several repetitions (the
machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore import Content, Event, EventStore, FunctionCall, Part, open_store
from runtime import Agent, ModelResponse, Runner, ScriptedModel, function_tool

STEPS = 8
"""Tool calls per invocation (one call per model turn)."""


@function_tool
def noop(n: int) -> dict[str, int]:
    """Do nothing and answer the number back."""
    return {"n": n}


@function_tool
async def noop_async(n: int) -> dict[str, int]:
    """Do nothing (async, no worker thread) and answer the number back."""
    return {"n": n}


def script(tool: str, steps: int) -> list[ModelResponse | str]:
    turns: list[ModelResponse | str] = [
        ModelResponse.calling(FunctionCall(id=f"call-{i}", name=tool, args={"n": i}))
        for i in range(steps)
    ]
    turns.append("done")
    return turns


async def best_of(reps: int, run: Callable[[], Awaitable[float]]) -> float:
    return min([await run() for _ in range(reps)])


async def raw_append(store: EventStore, count: int) -> float:
    """Seconds per awaited single-event append (a fresh session each call)."""
    session = await store.create_session(app_name="bench", user_id="u")
    content = Content(role="model", parts=(Part(text="x" * 300),))
    start = time.perf_counter()
    for version in range(count):
        await store.append(
            session.id, Event(author="agent", content=content), expected_version=version
        )
    return (time.perf_counter() - start) / count


async def loop_per_call(store: EventStore, tool: str, sessions: int, steps: int) -> float:
    """Seconds of ``Runner.run`` per tool call, over ``sessions`` invocations of ``steps`` calls."""
    tools = [noop, noop_async]
    total = 0.0
    for _ in range(sessions):
        agent = Agent(
            name="agent",
            model=ScriptedModel(script(tool, steps)),
            instruction="Call the tool.",
            tools=tools,
            max_steps=steps + 1,
        )
        runner = Runner(agent=agent, store=store, app_name="bench")
        session_id = (await runner.create_session(user_id="u")).id
        start = time.perf_counter()
        result = await runner.run(session_id=session_id, user_id="u", new_message="go")
        total += time.perf_counter() - start
        assert result.status == "completed", result
        assert len(result.events) == 3 * steps + 2
    return total / (sessions * steps)


async def main(quick: bool, memory: bool) -> int:
    appends, sessions, reps = (300, 10, 2) if quick else (2_000, 40, 4)
    has_sqlite = importlib.util.find_spec("eventstore.backends.sqlite.base") is not None
    with tempfile.TemporaryDirectory() as tmp:
        if memory or not has_sqlite:
            note = "" if memory else " (SQLite backend not available yet: numbers are memory's)"
            label = "memory" + note
            store = await open_store("memory://")
        else:
            label = f"SQLite file {Path(tmp) / 'bench.db'}"
            store = await open_store(Path(tmp) / "bench.db", auto_upgrade=True)
        async with store:
            await raw_append(store, 50)  # warm-up
            await loop_per_call(store, "noop_async", 2, 2)
            append = await best_of(reps, lambda: raw_append(store, appends))
            sync_call = await best_of(reps, lambda: loop_per_call(store, "noop", sessions, STEPS))
            async_call = await best_of(
                reps, lambda: loop_per_call(store, "noop_async", sessions, STEPS)
            )
    print(f"store: {label}")
    print(f"raw append (1 event, awaited, expected_version): {append * 1e6:9.1f} µs")
    print(
        f"loop per tool call, async no-op tool:            {async_call * 1e6:9.1f} µs"
        f"   = {async_call / append:5.1f} x raw append"
    )
    print(
        f"loop per tool call, sync no-op tool (thread):    {sync_call * 1e6:9.1f} µs"
        f"   = {sync_call / append:5.1f} x raw append"
    )
    print(
        f"(each tool call appends 3 events — model turn, claim, response — so 3.0 x is the "
        f"floor; {STEPS} calls per invocation, {sessions} invocations, best of {reps})"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    parser.add_argument("--memory", action="store_true", help="use the in-memory store")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.quick, args.memory)))
