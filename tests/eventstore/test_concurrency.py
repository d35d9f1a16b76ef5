"""Many writers, one session: asyncio writers with their own stores plus two OS processes.

Every writer appends pairs of events with ``expected_version`` and retries on ConcurrencyError.
Afterwards the log must be exactly what was acknowledged: seq 1..N, each event once, each pair
adjacent (appends are atomic), and the losers must have seen ConcurrencyError.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from _evs_support import StoreFactory

from eventstore import ConcurrencyError, Event, EventStore

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("_evs_child.py")
REPO = Path(__file__).resolve().parents[2]
ASYNC_WRITERS = 8
PROCESS_WRITERS = 2
ROUNDS = 3
APPENDS_PER_WRITER = 4


async def _writer(store: EventStore, sid: str, name: str, go: asyncio.Event) -> tuple[list[str],
                                                                                     int]:
    await go.wait()
    acked: list[str] = []
    conflicts = 0
    for i in range(APPENDS_PER_WRITER):
        batch = [
            Event(author=name, id=f"{name}-{i}-{part}", custom_metadata={"pair": f"{name}-{i}"})
            for part in ("a", "b")
        ]
        while True:
            version = await store.version(sid)
            await asyncio.sleep(0)  # let the others read the same version
            lost: ConcurrencyError | None = None
            try:
                await store.append(sid, batch, expected_version=version)
            except ConcurrencyError as error:
                lost = error
            if lost is not None:
                assert lost.expected_version == version
                assert lost.actual_version > version
                conflicts += 1
                continue
            acked.extend(e.id for e in batch)
            break
    return acked, conflicts


async def _spawn(url: str, sid: str, name: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), "contend", url, sid, name, str(APPENDS_PER_WRITER),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert line.strip() == b"ready", line
    return process


async def test_concurrency_writers_and_processes_append_exactly_once(
    sql_factory: StoreFactory,
) -> None:
    stores = [await sql_factory() for _ in range(ASYNC_WRITERS)]
    sid = "contended"
    await stores[0].create_session(app_name="app", user_id="u", session_id=sid)
    acked: list[str] = []
    conflicts: Counter[str] = Counter()

    for round_no in range(ROUNDS):
        processes = [
            await _spawn(sql_factory.url, sid, f"p{n}r{round_no}") for n in range(PROCESS_WRITERS)
        ]
        go = asyncio.Event()
        tasks = [
            asyncio.create_task(_writer(store, sid, f"w{n}r{round_no}", go))
            for n, store in enumerate(stores)
        ]
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        go.set()
        async with asyncio.timeout(120):
            for n, (ids, lost) in enumerate(await asyncio.gather(*tasks)):
                acked.extend(ids)
                conflicts[f"task{n}"] += lost
            for n, process in enumerate(processes):
                out, _ = await process.communicate()
                assert process.returncode == 0
                result = json.loads(out.decode().strip().splitlines()[-1])
                acked.extend(result["acked"])
                conflicts[f"process{n}"] += result["conflicts"]

    events = await stores[-1].read(sid)
    writers = ASYNC_WRITERS + PROCESS_WRITERS
    expected_total = ROUNDS * writers * APPENDS_PER_WRITER * 2
    assert len(acked) == expected_total
    assert [e.seq for e in events] == list(range(1, expected_total + 1))
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids), "an event is stored twice"
    assert set(ids) == set(acked), "stored events differ from the acknowledged ones"
    for first, second in zip(events[::2], events[1::2], strict=True):
        assert first.custom_metadata["pair"] == second.custom_metadata["pair"]
        assert (first.id[-1], second.id[-1]) == ("a", "b")
    assert await stores[0].version(sid) == expected_total
    # Losers exist: with this many writers racing on one version, conflicts are certain.
    assert sum(conflicts.values()) > 0, conflicts
    print(f"\n{sql_factory.name}: {expected_total} events, conflicts {dict(conflicts)}")


async def test_concurrency_one_store_many_tasks(store_factory: StoreFactory) -> None:
    """Concurrent appends through one store object: exactly one winner per version."""
    store = await store_factory()
    await store.create_session(app_name="app", user_id="u", session_id="s")

    async def attempt(n: int) -> bool | tuple[int, int]:
        try:
            await store.append("s", Event(author="a", id=f"e{n}"), expected_version=0)
        except ConcurrencyError as error:
            return (error.expected_version, error.actual_version)
        return True

    outcomes = await asyncio.gather(*(attempt(n) for n in range(16)))
    assert outcomes.count(True) == 1
    assert outcomes.count((0, 1)) == 15
    events = await store.read("s")
    assert len(events) == 1
    assert events[0].id == f"e{outcomes.index(True)}"


async def test_concurrency_processes_share_user_and_app_state(sql_factory: StoreFactory) -> None:
    """Three processes create sessions of one app and change its shared state at once: every
    session gets its own events, the app's shared-state events get distinct positions in each
    writer's order, and each session's state at every seq is the fold up to its position."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    names, per_process = ["pa", "pb", "pc"], 8
    processes = []
    for name in names:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), "share", sql_factory.url, "shared-app", name,
            str(per_process), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"ready"
        processes.append(process)
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        await process.stdin.drain()
    appended: dict[str, list[str]] = {}
    async with asyncio.timeout(120):
        for name, process in zip(names, processes, strict=True):
            out, _ = await process.communicate()
            assert process.returncode == 0
            appended[name] = json.loads(out.decode().strip().splitlines()[-1])["appended"]

    store = await sql_factory()
    backend = store._backend
    rows = {}
    for name in names:
        for n in range(per_process):
            sid = f"{name}-s{n}"
            stored = await backend.read(sid, after=None, upto=None, backwards=False, limit=None)
            assert [r.seq for r in stored] == list(range(1, 5))
            assert all(r.event_id.startswith(f"{name}-e") for r in stored)
            rows.update({r.event_id: r for r in stored})
    shared = sorted((r for r in rows.values() if r.shared_state), key=lambda r: r.position)
    positions = [r.position for r in shared]
    assert len(set(positions)) == len(positions) == len(names) * per_process * 2
    for name in names:
        mine = [rows[event_id].position for event_id in appended[name]]
        assert mine == sorted(mine), f"{name}'s positions go back in its own append order"
        shared_mine = [rows[e].position for e in appended[name] if rows[e].shared_state]
        assert len(set(shared_mine)) == len(shared_mine)
    # The fold at each seq: the session's own keys, and the app's newest shared values at or
    # below the event's position (at the session's head: the newest there are).
    for event_id, row in rows.items():
        head = row.seq == 4
        seen = [r for r in shared if head or r.position <= row.position]
        owner = row.session_id.split("-s")[0]
        by_owner = [r for r in seen if r.event_id.startswith(f"{owner}-")]
        state = await store.state(row.session_id, at=row.seq)
        assert state["n"] == int(event_id.split("-e")[1])
        assert state.get("app:last") == (seen[-1].event_id.replace("-e", "-") if seen else None)
        assert state.get("user:last") == (
            by_owner[-1].event_id.replace("-e", "-") if by_owner else None
        )
