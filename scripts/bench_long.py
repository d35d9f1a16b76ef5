"""Long histories: what a run loads from a 1,000,000-event session costs what it returns.

    .venv/bin/python scripts/bench_long.py [--events 1000000] [--backends sqlite,postgres,adk]

For each backend a *long* session of ``--events`` realistic agent events (``_bench_events``:
model calls, tool responses with nested results and state deltas, text turns) is built through
the store's batch append (``EventStore.append`` of 2,000 events at a time), with a compaction
recorded at seq N-1000 (``EventStore.compact``); a *short* session of 1,000 events has none.
Printed: bytes per event, then, for each read, its time, the rows the backend returned (a
counting hook wraps every read method of the backend) and the peak RSS of the process that made
it (each read runs in a fresh subprocess: its ``VmHWM``), long beside short, with
the ratio (target: within 2x). The reads:

- ``state``: the state at head (``EventStore.state``);
- ``request``: the model's request contents after the newest compaction
  (``EventStore.read_compacted`` + ``build_contents``: what ``ContentsProcessor`` sends);
- ``pending``: ``runtime.replay.session_pending`` (what ``evs pending`` reports).

Each read opens the store first (not timed, its rows not counted): the peak RSS includes the
interpreter and the imports, the same for every read.

PostgreSQL uses a private database on ``--pg-url``'s server, dropped afterwards.

The ``adk`` section (``--adk-events``, default 100,000) builds the same ADK history, with an ADK
compaction event 1,000 events from the end, in ADK's ``DatabaseSessionService`` (rows of its own
schema, in batches) and in our ``EventStoreSessionService`` (both SQLite files), then times
``get_session`` through each service's API, alternating rounds: median, spread, the rows ours
read, and the ratio (target: ours at least 20x faster).

Exit status 1 when a ratio misses its target.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_events import adk_conversation_event, realistic_event

from eventstore import Content, Event, EventStore, Part, open_store
from runtime import build_contents
from runtime.replay import session_pending

LONG, SHORT = "long", "short"
BATCH = 2000
TAIL = 1000
READS = ("state", "request", "pending")
DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


def count_rows(store: EventStore) -> Callable[[], int]:
    """Wrap every coroutine method of the store's backend so that the rows (list items) or
    the record its outermost call returns are counted (a method calling another is counted
    once); return a function giving the count so far."""
    backend = store.backend
    seen, depth = [0], [0]
    for name in dir(type(backend)):
        if name.startswith("__"):
            continue
        method = getattr(backend, name, None)
        if not asyncio.iscoroutinefunction(method):
            continue

        def wrap(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def counted(*args: Any, **kwargs: Any) -> Any:
                depth[0] += 1
                try:
                    result = await inner(*args, **kwargs)
                finally:
                    depth[0] -= 1
                if depth[0] == 0:
                    if isinstance(result, (list, tuple, dict)):
                        seen[0] += len(result)
                    elif result is not None and not isinstance(result, (bool, int)):
                        seen[0] += 1
                return result
            return counted

        setattr(backend, name, wrap(method))
    return lambda: seen[0]


def mixed_event(i: int) -> Event:
    """Event ``i`` of the log: a user message, then five events of ``realistic_event`` (two
    tool calls with their responses and a text answer), over and over."""
    block, step = divmod(i, 6)
    if step == 0:
        return Event(author="user", invocation_id=f"inv-{block}", content=Content(
            role="user", parts=(Part(text=f"Any flights for trip {block}?"),)))
    return realistic_event(block * 5 + step - 1, invocation=f"inv-{block}")


async def build(url: str, size: int) -> None:
    """The long session (``size`` events, a compaction at seq ``size - TAIL``) and the short
    one (``TAIL`` events). The state is read after every batch, as every run reads it (the
    store keeps its snapshots on those reads)."""
    async with await open_store(url, auto_upgrade=True) as store:
        for sid, count in ((LONG, size), (SHORT, TAIL)):
            await store.create_session(app_name="bench", user_id="u", session_id=sid)
            version, compacted = 0, sid == SHORT
            while version < count:
                cut = count - TAIL if not compacted else count
                batch = [mixed_event(i) for i in range(version, min(cut, version + BATCH))]
                if batch:
                    await store.append(sid, batch, expected_version=None)
                    version += len(batch)
                    await store.state(sid)
                if not compacted and version >= count - TAIL:
                    await store.compact(sid, upto=version, summary=Content(role="user", parts=(
                        Part(text="The user searched flights between eight airports for "
                             "14 March; every search found two, the cheapest 612.50 EUR."),)))
                    compacted = True
            await store.state(sid)
        if url.startswith("postgresql"):
            await _pg_analyze(url)


async def _pg_analyze(url: str) -> None:
    """ANALYZE, as autovacuum does after a bulk load: the planner's statistics of a table
    built seconds ago say it is empty."""
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def one_read(url: str, read: str, sid: str) -> dict[str, float]:
    async with await open_store(url) as store:
        rows = count_rows(store)
        started = time.perf_counter()
        if read == "state":
            await store.state(sid)
        elif read == "request":
            history = await store.read_compacted(sid)
            contents = build_contents(history.events)
            if history.summary is not None:
                contents.insert(0, history.summary.summary)
        elif read == "pending":
            await session_pending(store, sid)
        else:
            raise SystemExit(f"unknown read {read!r}")
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "rows": rows(), "peak_mib": _peak_mib()}


def _peak_mib() -> float:
    """This process's peak RSS. Linux keeps ``ru_maxrss`` across ``exec`` (a child started
    by the process that built a million events would report that process's peak), so the
    high-water mark of this process's own memory (``VmHWM``) is read where there is one."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(url: str, read: str, sid: str) -> tuple[float, int, float]:
    """Run one read in a fresh process; return (seconds, rows, peak RSS in MiB)."""
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    argv = [sys.executable, __file__, "--read", read, "--url", url, "--session", sid,
            "--out", out]
    pid = os.posix_spawn(sys.executable, argv, os.environ)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the {read} read of {sid} failed ({status})")
    result = json.loads(Path(out).read_text())
    os.unlink(out)
    return result["seconds"], int(result["rows"]), result["peak_mib"]


def section(name: str, url: str, size: int, file: Path | None) -> bool:
    started = time.perf_counter()
    asyncio.run(build(url, size))
    built = time.perf_counter() - started
    print(f"\n{name}: built {size:,} + {TAIL:,} events in {built:.1f} s", flush=True)
    if file is not None:
        total = sum(p.stat().st_size for p in file.parent.glob(file.name + "*"))
        print(f"  {total / (size + TAIL):.0f} bytes per event (database file with its WAL)")
    else:
        print(f"  {asyncio.run(_pg_bytes(url)) / (size + TAIL):.0f} bytes per event "
              "(pg_database_size)")
    ok = True
    print(f"  {'read':<8} {'long: ms':>9} {'rows':>6} {'MiB':>6}   {'short: ms':>9} {'rows':>6} "
          f"{'MiB':>6}   ratio")
    for read in READS:
        long_s, long_rows, long_mib = measure(url, read, LONG)
        short_s, short_rows, short_mib = measure(url, read, SHORT)
        ratio = long_s / short_s if short_s else float("inf")
        ok = ok and ratio <= 2.0
        print(f"  {read:<8} {long_s * 1000:9.1f} {long_rows:6d} {long_mib:6.1f}   "
              f"{short_s * 1000:9.1f} {short_rows:6d} {short_mib:6.1f}   {ratio:4.2f}x "
              f"{'ok' if ratio <= 2.0 else 'MISSED (target 2x)'}", flush=True)
    return ok


# --- ADK get_session with a compaction: ours against ADK's DatabaseSessionService ---------

ADK_TAIL = 1000
"""The ADK compaction is event ``N - ADK_TAIL`` (0-based); it covers every event before it."""
ADK_ROUNDS = 5


def _adk_history(size: int) -> list[Any]:
    """``size`` ADK events of a tool-using conversation (call, response, answer, in turn),
    timestamps a millisecond apart, the one at ``size - ADK_TAIL`` an ADK compaction
    (``EventActions.compaction``) of every event before it."""
    from google.adk.events import Event as AdkEvent
    from google.adk.events.event_actions import EventActions, EventCompaction
    from google.genai import types

    base = time.time() - size / 1000 - 60
    events: list[Any] = []
    cut = size - ADK_TAIL
    for i in range(size):
        ts = base + i / 1000
        if i == cut:
            events.append(AdkEvent(
                invocation_id=f"inv-{i // 3}", author="user", timestamp=ts,
                actions=EventActions(compaction=EventCompaction(
                    start_timestamp=base, end_timestamp=base + (cut - 1) / 1000,
                    compacted_content=types.Content(role="model", parts=[types.Part(
                        text="The user asked for the weather in Paris again and again; "
                             "it was 22 degrees and sunny each time.")])))))
            continue
        events.append(adk_conversation_event(i, timestamp=ts))
    return events


async def _build_adk_database(url: str, events: list[Any]) -> Any:
    """ADK's DatabaseSessionService with the history: the session through ``create_session``,
    the events as rows of its own schema (``StorageEvent.from_event``), 5,000 to a
    transaction through its own session factory: ``append_event`` one by one would take
    most of an hour at 100,000 events."""
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(url)
    session = await service.create_session(app_name="bench", user_id="u", session_id="adk")
    schema = service._get_schema_classes()
    for lo in range(0, len(events), 5000):
        async with service.database_session_factory() as sql:
            sql.add_all([schema.StorageEvent.from_event(session, e)
                         for e in events[lo:lo + 5000]])
            await sql.commit()
    return service


async def _build_adk_ours(path: str, events: list[Any]) -> Any:
    """Our EventStoreSessionService with the same history: the events before the compaction
    through the store's batch append of the adapter's own conversion (``from_adk_event``),
    the compaction through ``append_event`` (which makes it native), the rest batched."""
    from eventstore.integrations.adk import EventStoreSessionService, from_adk_event

    service = EventStoreSessionService(path)
    await service.create_session(app_name="bench", user_id="u", session_id="adk")
    store = await service.store()
    cut = len(events) - ADK_TAIL
    for lo in range(0, cut, BATCH):
        await store.append("adk", [from_adk_event(e) for e in events[lo:min(cut, lo + BATCH)]],
                           expected_version=None, app_name="bench", user_id="u")
    from google.adk.sessions.base_session_service import GetSessionConfig

    head = await service.get_session(app_name="bench", user_id="u", session_id="adk",
                                     config=GetSessionConfig(num_recent_events=1))
    assert head is not None
    await service.append_event(head, events[cut])
    await store.append("adk", [from_adk_event(e) for e in events[cut + 1:]],
                       expected_version=None, app_name="bench", user_id="u")
    return service


def adk_section(tmp: Path, size: int) -> bool:
    """Build the same ADK history in both services, then time ``get_session`` (no config)
    on each, alternating, ``ADK_ROUNDS`` rounds; print median, spread and the ratio."""
    async def run() -> bool:
        events = _adk_history(size)
        started = time.perf_counter()
        theirs = await _build_adk_database(f"sqlite+aiosqlite:///{tmp / 'adk-db.db'}", events)
        built_theirs = time.perf_counter() - started
        started = time.perf_counter()
        ours = await _build_adk_ours(str(tmp / "adk-ours.db"), events)
        built_ours = time.perf_counter() - started
        del events
        print(f"\nADK get_session, {size:,} events with a compaction at event "
              f"{size - ADK_TAIL:,} (SQLite files): built DatabaseSessionService in "
              f"{built_theirs:.1f} s, ours in {built_ours:.1f} s", flush=True)
        rows = count_rows(await ours.store())
        times: dict[str, list[float]] = {"DatabaseSessionService": [], "ours": []}
        got: dict[str, int] = {}
        read_rows = 0
        try:
            for _ in range(ADK_ROUNDS):
                for name, service in (("DatabaseSessionService", theirs), ("ours", ours)):
                    # Each read starts from the same heap: the previous read's session is
                    # dropped and collected first, else the cyclic GC walks the other
                    # service's 100,000 live events during this one's allocations.
                    gc.collect()
                    before = rows()
                    started = time.perf_counter()
                    session = await service.get_session(app_name="bench", user_id="u",
                                                        session_id="adk")
                    times[name].append(time.perf_counter() - started)
                    assert session is not None
                    got[name] = len(session.events)
                    del session
                    if name == "ours":
                        read_rows = rows() - before
        finally:
            await theirs.close()
            await ours.close()
        if got["DatabaseSessionService"] != size:
            raise SystemExit(f"DatabaseSessionService returned {got['DatabaseSessionService']}"
                             f" events, not {size}")
        for name, spent in times.items():
            spent.sort()
            print(f"  {name:<24} median {statistics.median(spent) * 1000:9.1f} ms "
                  f"(min {spent[0] * 1000:.1f}, max {spent[-1] * 1000:.1f}), "
                  f"{got[name]:,} events returned", flush=True)
        print(f"  ours read {read_rows:,} rows (the compaction, the {ADK_TAIL - 1:,} events "
              "after it, the session)")
        ratio = (statistics.median(times["DatabaseSessionService"])
                 / statistics.median(times["ours"]))
        print(f"  ours {ratio:.1f}x faster ({'ok' if ratio >= 20 else 'MISSED'}: target 20x)")
        return ratio >= 20

    return asyncio.run(run())


async def _pg_bytes(url: str) -> int:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await conn.close()


async def _pg_admin(url: str, sql: str) -> None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1).rsplit("/", 1)[0]
    conn = await asyncpg.connect(dsn + "/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events of the long session (default 1,000,000)")
    parser.add_argument("--backends", default="sqlite,postgres,adk",
                        help="sections to run: sqlite, postgres, adk (ADK get_session)")
    parser.add_argument("--adk-events", type=int, default=100_000,
                        help="events of the ADK session (default 100,000)")
    parser.add_argument("--pg-url", default=DEFAULT_PG)
    parser.add_argument("--read", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        result = asyncio.run(one_read(args.url, args.read, args.session))
        Path(args.out).write_text(json.dumps(result))
        return
    if args.events <= TAIL or args.adk_events <= ADK_TAIL:
        raise SystemExit(f"--events and --adk-events must be more than {TAIL}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                path = Path(tmp) / "long.db"
                ok = section("SQLite", str(path), args.events, path) and ok
            elif backend == "postgres":
                name = f"bench_long_{uuid.uuid4().hex[:8]}"
                url = args.pg_url.rsplit("/", 1)[0] + "/" + name
                asyncio.run(_pg_admin(args.pg_url, f'CREATE DATABASE "{name}"'))
                try:
                    ok = section("PostgreSQL", url, args.events, None) and ok
                finally:
                    asyncio.run(_pg_admin(args.pg_url, f'DROP DATABASE "{name}" WITH (FORCE)'))
            elif backend == "adk":
                ok = adk_section(Path(tmp), args.adk_events) and ok
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
