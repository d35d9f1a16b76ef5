"""Group commit on SQLite: writes waiting together commit in one transaction, each with its own
outcome; acknowledged appends survive SIGKILL; grouping never changes what the logs hold."""

from __future__ import annotations

import asyncio
import itertools
import random
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _evs_support import kill_after_ready
from _group_support import (
    backend_of,
    ev,
    open_sqlite,
    outcome,
    outcomes_while_locked,
    sessions,
    submitted,
    writer_held,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import (
    ConcurrencyError,
    DuplicateEventError,
    Event,
    EventStore,
    SessionExistsError,
    SessionNotFoundError,
    open_store,
)

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("_group_child.py")


async def test_group_each_write_gets_its_own_outcome(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "g.db")
    try:
        await sessions(store, "ok", "stale", "retry", "dup", "part")
        r1 = ev("r1")
        [retried_before] = await store.append("retry", r1, expected_version=0)
        await store.append("dup", ev("d1", "first"), expected_version=0)
        await store.append("stale", ev("s1"), expected_version=0)
        await store.append("part", ev("p1"), expected_version=0)
        group = backend_of(store)._group
        assert group is not None
        groups_before, writes_before = group.groups, group.writes

        async with writer_held(store):
            tasks = await submitted(
                lambda: store.append("ok", ev("o1"), expected_version=0),
                lambda: store.append("stale", ev("s2"), expected_version=0),  # conflict
                lambda: store.append("retry", r1, expected_version=0),  # retry: a no-op
                lambda: store.append("dup", ev("d1", "other"), expected_version=None),
                # the second event clashes after the first was inserted: both roll back
                lambda: store.append("part", [ev("p2"), ev("p1")], expected_version=1),
                lambda: store.append("ghost", ev("g1"), expected_version=0),
                lambda: store.create_session(app_name="app", user_id="u", session_id="ok"),
                lambda: store.create_session(app_name="app", user_id="u", session_id="new"),
                # sees the first write of its own group: the session is at 1 by then
                lambda: store.append("ok", ev("o2"), expected_version=1),
            )
        results = [await outcome(t) for t in tasks]

        assert group.groups == groups_before + 1, "the eight writes did not share one commit"
        # The append to "ghost" never reaches the writer: the store's lookup of (app, user,
        # id) finds no such session first.
        assert group.writes == writes_before + 8
        ok1, stale, retry, dup, part, ghost, exists, new, ok2 = results
        assert [e.seq for e in ok1] == [1]
        assert isinstance(stale, ConcurrencyError)
        assert (stale.expected_version, stale.actual_version) == (0, 1)
        assert [(e.seq, e.id) for e in retry] == [(retried_before.seq, "r1")]
        assert isinstance(dup, DuplicateEventError)
        assert dup.event_id == "d1"
        assert isinstance(part, DuplicateEventError)
        assert isinstance(ghost, SessionNotFoundError)
        assert isinstance(exists, SessionExistsError)
        assert new.id == "new"
        assert [e.seq for e in ok2] == [2]

        logs = {sid: [(e.seq, e.id, e.custom_metadata) for e in await store.read(sid)]
                for sid in ("ok", "stale", "retry", "dup", "part", "new")}
        assert logs == {
            "ok": [(1, "o1", {"text": "x"}), (2, "o2", {"text": "x"})],
            "stale": [(1, "s1", {"text": "x"})],
            "retry": [(1, "r1", {"text": "x"})],
            "dup": [(1, "d1", {"text": "first"})],
            "part": [(1, "p1", {"text": "x"})],
            "new": [],
        }
    finally:
        await store.aclose()


async def test_group_lone_append_commits_alone(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "g.db")
    try:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        group = backend_of(store)._group
        assert group is not None
        groups, alone = group.groups, group.alone
        for i in range(20):
            await store.append("s", ev(f"e{i}"), expected_version=i)
        # One commit each, on its own: nobody waited for company, no group was formed.
        assert (group.groups, group.alone) == (groups, alone + 20)
    finally:
        await store.aclose()


async def test_group_many_sessions_share_commits(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "g.db")
    try:
        ids = [f"s{i}" for i in range(32)]
        await sessions(store, *ids)
        group = backend_of(store)._group
        assert group is not None
        before_groups, before_writes, before_alone = group.groups, group.writes, group.alone

        async def write(sid: str) -> None:
            for i in range(10):
                await store.append(sid, ev(f"{sid}-{i}"), expected_version=i)

        await asyncio.gather(*(write(sid) for sid in ids))
        assert (group.writes - before_writes) + (group.alone - before_alone) == 320
        assert (group.groups - before_groups) + (group.alone - before_alone) < 320 / 2, \
            "appends of many sessions did not group"
        for sid in ids:
            assert [e.id for e in await store.read(sid)] == [f"{sid}-{i}" for i in range(10)]
    finally:
        await store.aclose()


async def test_group_failed_commit_fails_every_caller_and_stores_nothing(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "g.db")
    try:
        await sessions(store, "a", "b")
        results = await outcomes_while_locked(
            store, tmp_path / "g.db",
            lambda: store.append("a", ev("a1"), expected_version=0),
            lambda: store.append("b", ev("b1"), expected_version=0),
        )
        assert all("locked" in str(r) for r in results), results
        assert await store.read("a") == []
        assert await store.read("b") == []
    finally:
        await store.aclose()


async def test_group_backlog_from_idle_commits_in_two_pipelined_halves(tmp_path: Path) -> None:
    # 21 writes wait while the writer is busy. Taken from idle, the backlog goes in two
    # halves: the first half's answers are held while the second half runs its statements and
    # sent before the second COMMIT. When the second group fails before its COMMIT (a write
    # that ends the transaction under it and raises), the first half still gets its results,
    # committed, and the second half none.
    store = await open_sqlite(tmp_path / "g.db")
    try:
        ids = [f"s{i:02d}" for i in range(20)]
        await sessions(store, *ids)
        group = backend_of(store)._group
        assert group is not None
        groups, writes = group.groups, group.writes

        def poison(conn: sqlite3.Connection) -> None:
            conn.execute("ROLLBACK")
            raise RuntimeError("poison")  # outside a transaction: the whole group fails

        async with writer_held(store):
            tasks = await submitted(
                # Fully addressed, as the runtime does: no lookup before the writer's queue.
                *((lambda sid=sid: store.append(sid, ev(f"{sid}-1"), expected_version=0,
                                                app_name="app", user_id="u"))
                  for sid in ids),
                lambda: group.run(poison),
            )
        results = [await asyncio.wait_for(outcome(t), 10) for t in tasks]

        assert (group.groups - groups, group.writes - writes) == (2, 21)
        first, second = results[:11], results[11:]
        assert all([e.seq for e in r] == [1] for r in first), first
        assert all("poison" in str(r) for r in second), second
        for sid in ids[:11]:
            assert [e.id for e in await store.read(sid)] == [f"{sid}-1"]
        for sid in ids[11:]:
            assert await store.read(sid) == []
        # The writer goes on: the failed half's sessions take their appends now.
        for sid in ids[11:]:
            await store.append(sid, ev(f"{sid}-1"), expected_version=0)
    finally:
        await store.aclose()


class _LockedOnce:
    """A connection stand-in for ``GroupCommit``: the second group's ``BEGIN IMMEDIATE`` finds
    the file locked by another connection (busy at once with ``busy_timeout = 0``), then waits
    for the lock, and while it waits checks that the first group's callers were answered."""

    def __init__(self, first: list[asyncio.Future[Any]]) -> None:
        self.first = first
        self.timeout = 30_000
        self.begins = 0
        self.in_transaction = False
        self.answered_while_waiting: bool | None = None

    def execute(self, sql: str, *params: Any) -> Any:
        if sql == "PRAGMA busy_timeout":
            return _Row(self.timeout)
        if sql.startswith("PRAGMA busy_timeout = "):
            self.timeout = int(sql.rsplit(" ", 1)[1])
        elif sql == "BEGIN IMMEDIATE":
            self.begins += 1
            if self.begins == 2 and self.timeout == 0:
                self.begins -= 1
                error = sqlite3.OperationalError("database is locked")
                error.sqlite_errorcode = sqlite3.SQLITE_BUSY
                raise error
            if self.begins == 2:  # waiting for the other connection's lock
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and not all(f.done() for f in self.first):
                    time.sleep(0.01)
                self.answered_while_waiting = all(f.done() for f in self.first)
            self.in_transaction = True
        elif sql in ("COMMIT", "ROLLBACK"):
            self.in_transaction = False
        return None


class _Row:
    def __init__(self, value: int) -> None:
        self.value = value

    def fetchone(self) -> tuple[int]:
        return (self.value,)


async def test_group_held_answers_go_out_before_waiting_for_another_connections_lock() -> None:
    from eventstore.backends.sqlite.group import GroupCommit

    posted: list[Callable[[Any], None]] = []
    group = GroupCommit(posted.append)
    tasks = [asyncio.ensure_future(group.run(lambda conn, i=i: i)) for i in range(20)]
    await asyncio.sleep(0.01)
    assert len(posted) == 1
    # From idle the 20 waiting writes go in two groups of 10: the first one's answers are
    # held while the second begins, and that BEGIN finds the lock taken.
    futures = [item.future for item in group._waiting[:10]]
    conn = _LockedOnce(futures)
    await asyncio.to_thread(posted[0], conn)
    assert conn.answered_while_waiting is True
    assert conn.timeout == 30_000, "the connection's busy timeout was not restored"
    assert [await t for t in tasks] == list(range(20))
    assert (group.groups, group.writes) == (2, 20)


def test_begin_now_does_not_wait_for_another_connections_lock(tmp_path: Path) -> None:
    from eventstore.backends.sqlite.group import _begin_now

    path = tmp_path / "lock.db"
    conn = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA busy_timeout = 4321")
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        assert _begin_now(conn) is False
        assert time.monotonic() - started < 1, "it waited for the lock"
        assert not conn.in_transaction
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 4321
        other.execute("COMMIT")
        assert _begin_now(conn) is True
        assert conn.in_transaction
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 4321
        conn.execute("COMMIT")
    finally:
        conn.close()
        other.close()


async def test_group_small_backlog_from_idle_is_one_group(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "g.db")
    try:
        ids = [f"s{i:02d}" for i in range(8)]
        await sessions(store, *ids)
        group = backend_of(store)._group
        assert group is not None
        groups, writes = group.groups, group.writes
        async with writer_held(store):
            tasks = await submitted(
                *((lambda sid=sid: store.append(sid, ev(f"{sid}-1"), expected_version=0))
                  for sid in ids))
        results = [await t for t in tasks]
        assert all([e.seq for e in r] == [1] for r in results), results
        assert (group.groups - groups, group.writes - writes) == (1, 8)
    finally:
        await store.aclose()


# -- SIGKILL while 64 sessions append -----------------------------------------------------------

SESSIONS = 64
BATCH = 3


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


async def _run_and_kill(url: str, prefix: str, delay: float) -> set[str]:
    out = await kill_after_ready([str(CHILD), url, prefix, str(SESSIONS), str(BATCH)], delay)
    # a line cut by the kill is not an acknowledgement
    return {line.split()[1] for line in out.splitlines()
            if line.endswith(tuple("0123456789")) and len(line.split()) == 2}


@pytest.mark.slow
async def test_group_sigkill_64_sessions_acknowledged_present_never_partial(
    tmp_path: Path,
) -> None:
    rng = random.Random(15)
    db = tmp_path / "crash.db"
    url = f"sqlite+aiosqlite:///{db}"
    async with await open_store(url, auto_upgrade=True) as setup:
        for i in range(SESSIONS):
            await setup.create_session(app_name="app", user_id="u", session_id=f"g{i}")

    acked: set[str] = set()
    started, kills = time.monotonic(), 0
    while kills < 8 and time.monotonic() - started < 60:
        acked |= await _run_and_kill(url, f"k{kills}", 0.2 + rng.random() * 0.6)
        kills += 1
        assert _integrity(db) == "ok", f"integrity check failed after kill {kills}"
        async with await open_store(url) as store:
            stored: set[str] = set()
            for i in range(SESSIONS):
                events = await store.read(f"g{i}")
                assert [e.seq for e in events] == list(range(1, len(events) + 1))
                sizes = Counter(e.custom_metadata["batch"] for e in events)
                torn = {tag: n for tag, n in sizes.items() if n != BATCH}
                assert not torn, f"batches stored in part after kill {kills}: {torn}"
                stored |= set(sizes)
            missing = acked - stored
            assert not missing, f"acknowledged batches lost after kill {kills}: {missing}"
    assert kills >= 4
    assert len(acked) > SESSIONS, "the writers hardly acknowledged anything"


# -- grouped and ungrouped writers give the same logs -------------------------------------------

N_SESSIONS = 4

operation = st.tuples(
    st.integers(0, N_SESSIONS),  # N_SESSIONS names a session that does not exist
    st.integers(1, 3),  # batch size
    st.sampled_from(["current", "stale", "none", "retry", "reuse"]),
)


def plan(ops: list[tuple[int, int, str]]) -> list[tuple[str, list[Event], int | None]]:
    """Turn drawn operations into appends with fixed arguments (versions as a sequential
    run would see them, when the drawn mode asks for the current one)."""
    versions = [0] * N_SESSIONS
    batches: list[list[list[Event]]] = [[] for _ in range(N_SESSIONS)]
    out: list[tuple[str, list[Event], int | None]] = []
    for n, (s, size, mode) in enumerate(ops):
        sid = f"s{s}"
        if s == N_SESSIONS:
            out.append((sid, [ev(f"n{n}")], 0))
            continue
        previous = batches[s]
        if mode == "retry" and previous:
            out.append((sid, previous[-1], versions[s] - len(previous[-1])))
            continue
        if mode == "reuse" and previous:
            out.append((sid, [ev(previous[0][0].id, "other payload")], None))
            continue
        batch = [ev(f"{sid}-{n}-{i}") for i in range(size)]
        expected = {"stale": max(0, versions[s] - 1) if versions[s] else 7,
                    "none": None}.get(mode, versions[s])
        out.append((sid, batch, expected))
        if expected is None or expected == versions[s]:
            versions[s] += size
            previous.append(batch)
    return out


async def run_plan(
    store: EventStore, appends: list[tuple[str, list[Event], int | None]], cuts: list[int]
) -> list[Any]:
    """Run the appends in order; writes between two cuts are submitted together (one group)."""
    outcomes: list[Any] = []
    bounds = sorted({0, len(appends), *(c % (len(appends) + 1) for c in cuts)})
    for lo, hi in itertools.pairwise(bounds):
        async with writer_held(store):
            tasks = await submitted(*(
                (lambda a=a: store.append(a[0], a[1], expected_version=a[2]))
                for a in appends[lo:hi]
            ))
        for task in tasks:
            result = await outcome(task)
            outcomes.append(
                type(result).__name__ if isinstance(result, Exception)
                else [(e.seq, e.id) for e in result]
            )
    return outcomes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=24),
       cuts=st.lists(st.integers(0, 30), max_size=4))
def test_group_interleavings_give_the_same_logs_as_ungrouped(
    ops: list[tuple[int, int, str]], cuts: list[int]
) -> None:
    appends = plan(ops)

    async def one(path: Path, grouped: bool) -> tuple[list[Any], dict[str, Any]]:
        store = await open_sqlite(path, group_commit=grouped)
        try:
            for i in range(N_SESSIONS):
                await store.create_session(app_name="app", user_id="u", session_id=f"s{i}")
            outcomes = await (run_plan(store, appends, cuts) if grouped else run_plan(
                store, appends, []))
            logs = {f"s{i}": [(e.seq, e.id, e.custom_metadata, e.seq)
                              for e in await store.read(f"s{i}")] for i in range(N_SESSIONS)}
            return outcomes, logs
        finally:
            await store.aclose()

    async def both() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            grouped = await one(Path(tmp) / "grouped.db", True)
            alone = await one(Path(tmp) / "alone.db", False)
        assert grouped == alone

    asyncio.run(both())
