"""Side by side through the frameworks' own APIs: their session backends vs ours, in one run.

    .venv/bin/python scripts/bench_frameworks.py [--quick] [--only adk|openai-agents]

Needs the extras (``pip install -e '.[adk,openai-agents]'``). On temporary SQLite files:

(a) google-adk: ``append_event`` of the same N agent events (a model turn calling a tool, the
    tool's response, a text answer, in turn), each awaited, into one session — through ADK's
    ``DatabaseSessionService`` (SQLAlchemy over aiosqlite), ADK's ``SqliteSessionService`` and
    our ``EventStoreSessionService``, taking turns every 500 events so that all three see the
    same machine; then ``get_session`` of that N-event session (5 rounds, in turns too).
    Ratios are per chunk / per round (measured at the same moment), printed as median
    [min-max]; the targets are judged on the medians.
(b) OpenAI Agents SDK: ``add_items`` of N items one call each (the two sessions taking turns
    every 500 items), then 5 rounds of ``get_items()`` of all of them, the two taking turns in
    each round, through the SDK's ``SQLiteSession`` and our ``EventStoreSession``: *warm* =
    again on the session object that wrote them (ours answers from its cache of the items at
    head); *cold* = a fresh session object over the existing file, constructed, asked once and
    closed, as a new process would (ours opens its store there, the imports being done; ours
    answers from the items at head it saved in the store, checked against the log). Also
    printed, not judged: ours cold without that saved cache (dropped by
    ``rebuild_snapshots`` before each read, outside the timing) — what the first read after
    ``evs db rebuild-snapshots`` or an upgrade costs.

Prints rates, load ms and our ratio to each baseline, per chunk / round (median [min-max]).
Targets, judged on the medians:
ours >= 20x DatabaseSessionService on append and >= 5x on load; against SQLiteSession >= 2x on
``add_items`` and >= 1x on both reads.
Exit status 1 when a target is missed (the full run only; --quick is a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_events import adk_conversation_event
from agents.memory import SQLiteSession
from google.adk.events import Event as AdkEvent
from google.adk.sessions import BaseSessionService, DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from eventstore import open_store
from eventstore.integrations.adk import EventStoreSessionService
from eventstore.integrations.openai_agents import EventStoreSession


def adk_event(i: int) -> AdkEvent:
    """The i-th event of an agent conversation: call, response, answer, in turn."""
    event: AdkEvent = adk_conversation_event(i)
    return event


def oa_item(i: int) -> dict[str, Any]:
    """The i-th item of an OpenAI Agents conversation (user and assistant messages)."""
    if i % 2 == 0:
        return {"role": "user", "content": f"What is the weather in Paris? ({i})"}
    return {"role": "assistant", "type": "message", "id": f"msg_{i}", "status": "completed",
            "content": [{"type": "output_text", "text": "22 degrees and sunny.",
                         "annotations": []}]}


async def best_of(runs: int, work: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        times.append(time.perf_counter() - start)
    return min(times)


CHUNK = 500
"""Events each service appends before the next takes its turn (see ``bench_adk``)."""


LOAD_ROUNDS = 5
"""Alternating rounds of ``get_session`` (see ``bench_adk``)."""


@dataclasses.dataclass
class AdkRun:
    """One ADK service's figures from ``bench_adk``: events/s of each ``CHUNK`` of appends
    and ms of each load round, in the order they were measured."""

    chunk_rates: list[float]
    loads_ms: list[float]

    @property
    def rate(self) -> float:
        """Events/s over the whole append (events / total time)."""
        return len(self.chunk_rates) / sum(1 / r for r in self.chunk_rates)


async def bench_adk(services: dict[str, BaseSessionService], n: int) -> dict[str, AdkRun]:
    """Each service appends the same ``n`` events to a session of its own, the services taking
    turns every ``CHUNK`` events, then loads its session (``LOAD_ROUNDS`` rounds, the services
    taking turns in each): a machine that speeds up or slows down during the run does so for
    every service alike (the machines this runs on are shared), and each chunk / round gives
    one ratio measured at one moment."""
    events = [adk_event(i) for i in range(n)]
    sessions = {name: await service.create_session(app_name="bench", user_id="u",
                                                   session_id="s")
                for name, service in services.items()}
    runs = {name: AdkRun([], []) for name in services}
    for lo in range(0, n, CHUNK):
        chunk = events[lo:lo + CHUNK]
        for name, service in services.items():
            session = sessions[name]
            start = time.perf_counter()
            for event in chunk:
                await service.append_event(session, event)
            runs[name].chunk_rates.append(len(chunk) / (time.perf_counter() - start))
    for _ in range(LOAD_ROUNDS):
        for name, service in services.items():
            start = time.perf_counter()
            got = await service.get_session(app_name="bench", user_id="u", session_id="s")
            runs[name].loads_ms.append((time.perf_counter() - start) * 1000)
            if got is None or len(got.events) != n:
                raise SystemExit(f"{name}: get_session returned the wrong events")
            del got
    return runs


def spread(values: list[float]) -> str:
    """``median [min-max]`` of ``values``."""
    return (f"{statistics.median(values):,.1f} [{min(values):,.1f}-{max(values):,.1f}]")


@dataclasses.dataclass
class OaRun:
    """One OpenAI Agents session's figures from ``bench_openai``: items/s of each ``CHUNK``
    of ``add_items`` and ms of each warm and cold ``get_items()`` round."""

    chunk_rates: list[float]
    warm_ms: list[float]
    cold_ms: list[float]

    @property
    def rate(self) -> float:
        """Items/s over the whole append."""
        return len(self.chunk_rates) / sum(1 / r for r in self.chunk_rates)


@dataclasses.dataclass
class OaSubject:
    """A session type under test: its open session, and how to make and close another over
    the same file."""

    session: Any
    fresh: Callable[[], Awaitable[Any]]
    close: Callable[[Any], Awaitable[None]]


async def bench_openai(subjects: dict[str, OaSubject], n: int) -> dict[str, OaRun]:
    """``add_items`` of the same ``n`` items, one call each, the sessions taking turns every
    ``CHUNK`` items; then ``LOAD_ROUNDS`` rounds of a warm and a cold ``get_items()`` (see the
    module docstring), the sessions taking turns in each round."""
    items = [oa_item(i) for i in range(n)]
    runs = {name: OaRun([], [], []) for name in subjects}
    for lo in range(0, n, CHUNK):
        chunk = items[lo:lo + CHUNK]
        for name, subject in subjects.items():
            start = time.perf_counter()
            for item in chunk:
                await subject.session.add_items([item])
            runs[name].chunk_rates.append(len(chunk) / (time.perf_counter() - start))

    def check(name: str, got: list[Any]) -> None:
        if len(got) != n:
            raise SystemExit(f"{name}: get_items returned {len(got)} items, not {n}")

    for name, subject in subjects.items():
        check(name, await subject.session.get_items())  # ours builds its cache at head here
    for _ in range(LOAD_ROUNDS):
        for name, subject in subjects.items():
            start = time.perf_counter()
            check(name, await subject.session.get_items())
            runs[name].warm_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            other = await subject.fresh()
            check(name, await other.get_items())
            await subject.close(other)  # inside the timing: a cold read's cost
            runs[name].cold_ms.append((time.perf_counter() - start) * 1000)
    return runs


async def main(quick: bool, only: str | None = None) -> int:
    n_adk = 1_000 if quick else 10_000
    n_oa = 1_000 if quick else 10_000
    tmp = Path(tempfile.mkdtemp(prefix="evs-bench-frameworks-"))
    missed = [] if only == "openai-agents" else await run_adk(tmp, n_adk)
    if only != "adk":
        missed += await run_openai(tmp, n_oa)
    if quick:
        print("\n--quick is a smoke run: the targets are judged on the full run.")
        return 0
    print("\nall targets met" if not missed else f"\nmissed: {', '.join(missed)}")
    return 1 if missed else 0


async def run_adk(tmp: Path, n_adk: int) -> list[str]:
    """Part (a); returns the targets missed."""
    print(f"google-adk: append_event x {n_adk:,} (awaited, one session), then get_session")
    services: dict[str, BaseSessionService] = {
        "DatabaseSessionService": DatabaseSessionService(
            f"sqlite+aiosqlite:///{tmp / 'adk-db.db'}"),
        "SqliteSessionService": SqliteSessionService(str(tmp / "adk-sqlite.db")),
        "ours: EventStoreSessionService": EventStoreSessionService(str(tmp / "evs-adk.db")),
    }
    try:
        adk = await bench_adk(services, n_adk)
    finally:
        for service in services.values():
            close = getattr(service, "close", None)
            if close is not None:
                await close()
    ours = adk["ours: EventStoreSessionService"]
    for name, run in adk.items():
        print(f"  {name:<32} {run.rate:>8,.0f} events/s (per chunk {spread(run.chunk_rates)})"
              f"   load ms {spread(run.loads_ms)}")

    def ratios(base: AdkRun) -> tuple[list[float], list[float]]:
        # One ratio per chunk / round: the two figures were measured at the same moment.
        return ([o / b for o, b in zip(ours.chunk_rates, base.chunk_rates, strict=True)],
                [b / o for o, b in zip(ours.loads_ms, base.loads_ms, strict=True)])

    db_append, db_load = ratios(adk["DatabaseSessionService"])
    sq_append, sq_load = ratios(adk["SqliteSessionService"])
    print(f"  ours vs DatabaseSessionService: append {spread(db_append)}x (target 20x), "
          f"load {spread(db_load)}x (target 5x)")
    print(f"  ours vs SqliteSessionService:   append {spread(sq_append)}x, "
          f"load {spread(sq_load)}x")
    return [
        what for what, ok in (
            ("append >= 20x DatabaseSessionService", statistics.median(db_append) >= 20),
            ("load >= 5x DatabaseSessionService", statistics.median(db_load) >= 5),
        ) if not ok
    ]


async def run_openai(tmp: Path, n_oa: int) -> list[str]:
    """Part (b); returns the targets missed."""

    print(f"\nOpenAI Agents SDK: add_items x {n_oa:,} (one item per call), then get_items()")
    async def sqlite_fresh() -> SQLiteSession:
        return SQLiteSession("s", str(tmp / "oa.db"))

    async def sqlite_close(session: SQLiteSession) -> None:
        session.close()

    async def ours_fresh() -> EventStoreSession:
        return EventStoreSession("s", str(tmp / "evs-oa.db"))

    async def ours_close(session: EventStoreSession) -> None:
        await session.close()

    theirs, mine = await sqlite_fresh(), await ours_fresh()
    try:
        runs = await bench_openai({
            "SQLiteSession": OaSubject(theirs, sqlite_fresh, sqlite_close),
            "ours: EventStoreSession": OaSubject(mine, ours_fresh, ours_close),
        }, n_oa)
    finally:
        theirs.close()
        await mine.close()

    async def uncached() -> float:
        store = await open_store(tmp / "evs-oa.db")
        await store.rebuild_snapshots()
        await store.aclose()
        start = time.perf_counter()
        other = await ours_fresh()
        if len(await other.get_items()) != n_oa:
            raise SystemExit("ours: get_items returned the wrong number of items")
        await ours_close(other)
        return time.perf_counter() - start

    uncached_ms = [await uncached() * 1000 for _ in range(3)]
    for name, run in runs.items():
        print(f"  {name:<26} {run.rate:>7,.0f} items/s   get ms warm {spread(run.warm_ms)}"
              f"   cold {spread(run.cold_ms)}")
    base, ours = runs["SQLiteSession"], runs["ours: EventStoreSession"]
    add = [o / b for o, b in zip(ours.chunk_rates, base.chunk_rates, strict=True)]
    warm = [b / o for o, b in zip(ours.warm_ms, base.warm_ms, strict=True)]
    cold = [b / o for o, b in zip(ours.cold_ms, base.cold_ms, strict=True)]
    print(f"  ours vs SQLiteSession (targets: add 2x, get 1x): add {spread(add)}x, "
          f"get warm {spread(warm)}x, "
          f"cold {spread(cold)}x")
    print(f"  ours cold without its saved cache: {spread(uncached_ms)} ms "
          f"({statistics.median(base.cold_ms) / statistics.median(uncached_ms):.2f}x; "
          "not judged)")

    return [
        what for what, ratios, target in (
            ("add_items >= 2x SQLiteSession", add, 2.0),
            ("get_items warm >= 1x SQLiteSession", warm, 1.0),
            ("get_items cold >= 1x SQLiteSession", cold, 1.0),
        ) if statistics.median(ratios) < target
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 events instead of 10,000")
    parser.add_argument("--only", choices=["adk", "openai-agents"],
                        help="run one framework's part only")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.quick, args.only)))
