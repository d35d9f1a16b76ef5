"""Benchmark LangGraph checkpointers side by side on one graph, in one run.

    .venv/bin/python scripts/bench_langgraph.py [--threads 200] [--steps 500]

The graph is a small chat: a ``messages`` list (``add_messages``, langchain-core messages) and
one node that answers the newest message; one *step* is one ``invoke`` of a user message (two
messages added, two checkpoints). Each checkpointer runs (a) ``--threads`` threads of one
invoke each (the async savers all at once with ``asyncio.gather``, the sync one in turn) and
(b) one thread of ``--steps`` steps. Printed: wall time of each part and in total, bytes on disk
after (b) (the database file with its WAL), and the bytes each 100 steps of (b) added, to show
whether a thread's bytes per step stay flat as it grows.

Checkpointers: ``InMemorySaver`` (no disk: the floor), ``AsyncSqliteSaver``, ``SqliteSaver``
(``langgraph-checkpoint-sqlite``) and ``EventStoreSaver`` on a SQLite file. Targets, against
``AsyncSqliteSaver``: total wall time at least 1.5x faster, bytes of the long thread at most
0.2x, and the last 100 steps add at most 1.25x the bytes of the second 100. Exit status 1 when
a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import operator
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore.integrations.langgraph import EventStoreSaver

_WINDOW = 100


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]


def _answer(state: Chat) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"You said: {last.content}. Noted, thank you.")],
            "turns": 1}


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(Chat)
    builder.add_node("answer", _answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def _message(step: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=f"message {step}: what about the next item?")],
            "turns": 0}


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _bytes(path: Path | None) -> int:
    """The file's bytes with its WAL, after moving the WAL into the file (outside the timed
    parts): what the data takes, not how far the WAL got before its next checkpoint."""
    if path is None:
        return 0
    with contextlib.closing(sqlite3.connect(path)) as db:
        for _ in range(50):
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                break
            time.sleep(0.01)
        else:
            print(f"warning: the WAL of {path} could not be checkpointed", file=sys.stderr)
    total = 0
    for suffix in ("", "-wal"):
        candidate = Path(str(path) + suffix)
        if candidate.exists():
            total += candidate.stat().st_size
    return total


class Result:
    """One checkpointer's figures."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.many = 0.0
        self.long = 0.0
        self.bytes = 0
        self.windows: list[int] = []

    @property
    def total(self) -> float:
        return self.many + self.long


async def _run_async(name: str, opened: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
                     path: Path | None, threads: int, steps: int) -> Result:
    result = Result(name)
    async with opened() as saver:
        graph = _graph(saver)
        await graph.ainvoke(_message(0), _cfg("warm-up"))  # tables made, connections open
        started = time.perf_counter()
        await asyncio.gather(*(graph.ainvoke(_message(0), _cfg(f"many-{i}"))
                               for i in range(threads)))
        result.many = time.perf_counter() - started
        before = mark = _bytes(path)
        started = time.perf_counter()
        for step in range(steps):
            await graph.ainvoke(_message(step), _cfg("long"))
            if (step + 1) % _WINDOW == 0:
                paused = time.perf_counter()
                now = _bytes(path)
                result.windows.append(now - mark)
                mark = now
                started += time.perf_counter() - paused
        result.long = time.perf_counter() - started
        state = await graph.aget_state(_cfg("long"))
        assert len(state.values["messages"]) == 2 * steps, name
        result.bytes = _bytes(path) - before
    return result


def _run_sync(name: str, opened: Callable[[], contextlib.AbstractContextManager[Any]],
              path: Path | None, threads: int, steps: int) -> Result:
    result = Result(name)
    with opened() as saver:
        graph = _graph(saver)
        graph.invoke(_message(0), _cfg("warm-up"))  # tables made, connection open
        started = time.perf_counter()
        for i in range(threads):
            graph.invoke(_message(0), _cfg(f"many-{i}"))
        result.many = time.perf_counter() - started
        before = mark = _bytes(path)
        started = time.perf_counter()
        for step in range(steps):
            graph.invoke(_message(step), _cfg("long"))
            if (step + 1) % _WINDOW == 0:
                paused = time.perf_counter()
                now = _bytes(path)
                result.windows.append(now - mark)
                mark = now
                started += time.perf_counter() - paused
        result.long = time.perf_counter() - started
        assert len(graph.get_state(_cfg("long")).values["messages"]) == 2 * steps, name
        result.bytes = _bytes(path) - before
    return result


@contextlib.asynccontextmanager
async def _memory_async() -> AsyncIterator[InMemorySaver]:
    yield InMemorySaver()


@contextlib.contextmanager
def _sqlite_sync(path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


@contextlib.asynccontextmanager
async def _ours(path: Path) -> AsyncIterator[EventStoreSaver]:
    async with EventStoreSaver(str(path)) as saver:
        yield saver


def _print(results: list[Result], steps: int) -> None:
    print(f"{'checkpointer':<20} {'many (s)':>9} {'long (s)':>9} {'total (s)':>10} "
          f"{'long bytes':>12} {'B/step':>8}  bytes added per {_WINDOW} steps")
    for r in results:
        per_step = r.bytes / steps if steps else 0
        windows = " ".join(f"{w:,}" for w in r.windows)
        print(f"{r.name:<20} {r.many:>9.2f} {r.long:>9.2f} {r.total:>10.2f} "
              f"{r.bytes:>12,} {per_step:>8,.0f}  {windows}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        results.append(await _run_async("InMemorySaver", _memory_async, None,
                                        args.threads, args.steps))
        aio = base / "aio.db"
        results.append(await _run_async(
            "AsyncSqliteSaver", lambda: AsyncSqliteSaver.from_conn_string(str(aio)), aio,
            args.threads, args.steps))
        plain = base / "sync.db"
        results.append(await asyncio.to_thread(
            _run_sync, "SqliteSaver", lambda: _sqlite_sync(plain), plain,
            args.threads, args.steps))
        ours = base / "evs.db"
        results.append(await _run_async("EventStoreSaver", lambda: _ours(ours), ours,
                                        args.threads, args.steps))
    print(f"{args.threads} threads x 1 invoke, then 1 thread x {args.steps} steps "
          f"(one step: one invoke, 2 messages)")
    _print(results, args.steps)
    by = {r.name: r for r in results}
    theirs, mine = by["AsyncSqliteSaver"], by["EventStoreSaver"]
    speed = theirs.total / mine.total
    size = mine.bytes / theirs.bytes if theirs.bytes else 0.0
    flat = (mine.windows[-1] / mine.windows[1]) if len(mine.windows) > 2 and mine.windows[1] \
        else 1.0
    print(f"EventStoreSaver vs AsyncSqliteSaver: {speed:.2f}x faster in total (target >= 1.5), "
          f"{size:.3f}x the bytes of the long thread (target <= 0.2); last/second window of "
          f"bytes per {_WINDOW} steps {flat:.2f} (target <= 1.25)")
    missed = speed < 1.5 or size > 0.2 or flat > 1.25
    if missed:
        print("a target was missed")
    return 1 if missed and os.environ.get("EVS_BENCH_NO_FAIL") is None else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
