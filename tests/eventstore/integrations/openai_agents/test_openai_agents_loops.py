"""Which loop runs a session's store work: a SQLite file session serves the first loop that
calls it on a store of that loop (no hop to the home loop) and every other loop on the home
loop, hands that store on when its loop closes, and closes it from anywhere — even from inside
that loop, which cannot run while ``close()`` waits. A ``memory://`` session keeps one store,
on the home loop, since a second store would not see its data."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import asyncio  # noqa: E402
import gc  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from eventstore import EventStore, StoreClosedError, StoreUsageError  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession  # noqa: E402

DEADLINE = 60.0
"""Seconds a scenario in a thread may take: a hang fails the test instead."""

HOME = "eventstore-home-loop"


def _msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def _where(session: EventStoreSession) -> tuple[str, EventStore]:
    """The thread that runs the session's store work for the calling loop, and that store."""

    async def job(store: EventStore) -> tuple[str, EventStore]:
        return threading.current_thread().name, store

    return await session._handle.run(job)


def _in_thread(scenario: Any) -> Any:
    """``asyncio.run(scenario())`` in a daemon thread; fails if it is not done by DEADLINE."""
    outcome: list[Any] = []

    def main() -> None:
        try:
            outcome.append((True, asyncio.run(scenario())))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=main, daemon=True, name="caller")
    thread.start()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive(), f"still running after {DEADLINE} s: a hang"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def test_a_file_session_runs_on_its_first_loop_and_serves_the_others_at_home(
    tmp_path: Path,
) -> None:
    session = EventStoreSession("s", str(tmp_path / "chat.db"))
    first_loop_busy = threading.Event()
    others_done = threading.Event()
    seen: dict[str, Any] = {}

    async def first() -> None:
        await session.add_items([_msg("from the first loop")])
        seen["first"] = await _where(session)
        first_loop_busy.set()
        await asyncio.to_thread(others_done.wait, DEADLINE)  # this loop keeps running
        seen["first items"] = await session.get_items()

    async def other() -> None:
        first_loop_busy.wait(DEADLINE)
        seen["other"] = await _where(session)
        seen["other items"] = await session.get_items()
        await session.add_items([_msg("from another loop")])
        others_done.set()

    runner = threading.Thread(target=lambda: _in_thread(first), daemon=True)
    runner.start()
    try:
        _in_thread(other)
    finally:
        others_done.set()
        runner.join(DEADLINE)
    session.close()
    assert seen["first"][0] == "caller"  # on the caller's own loop: no hop
    assert seen["other"][0] == HOME
    assert seen["other"][1] is not seen["first"][1]
    assert seen["other items"] == [_msg("from the first loop")]
    assert seen["first items"] == [_msg("from the first loop"), _msg("from another loop")]


def test_a_memory_session_keeps_its_one_store_on_the_home_loop() -> None:
    session = EventStoreSession("s")

    async def scenario() -> tuple[str, EventStore]:
        await session.add_items([_msg("kept")])
        return await _where(session)

    thread, store = _in_thread(scenario)
    assert thread == HOME
    assert _in_thread(lambda: _where(session))[1] is store
    assert _in_thread(session.get_items) == [_msg("kept")]
    session.close()


def _state(store: EventStore) -> str:
    """``closed`` or ``open`` (a store belonging to another loop refuses this one's calls)."""

    async def probe() -> str:
        try:
            await store.list_sessions()
        except StoreClosedError:
            return "closed"
        except StoreUsageError:
            return "open"
        return "open"

    return asyncio.run(probe())


async def _add_and_locate(session: EventStoreSession, text: str) -> tuple[str, EventStore]:
    await session.add_items([_msg(text)])
    return await _where(session)


def test_a_file_session_hands_its_store_on_when_its_loop_closed(tmp_path: Path) -> None:
    session = EventStoreSession("s", str(tmp_path / "chat.db"))
    thread, first = asyncio.run(_add_and_locate(session, "one"))  # that loop closes after
    assert thread == threading.current_thread().name
    assert _state(first) == "open"
    thread, second = asyncio.run(_add_and_locate(session, "two"))
    assert thread == threading.current_thread().name
    assert second is not first
    assert _state(first) == "closed"
    assert asyncio.run(session.get_items()) == [_msg("one"), _msg("two")]
    session.close()
    assert _state(second) == "closed"


@pytest.mark.parametrize("awaited", [pytest.param(False, id="close"),
                                     pytest.param(True, id="await-close")])
def test_close_inside_the_loop_that_holds_the_store(tmp_path: Path, awaited: bool) -> None:
    session = EventStoreSession("s", str(tmp_path / "chat.db"))

    async def scenario() -> EventStore:
        await session.add_items([_msg("kept")])
        _, store = await _where(session)
        if awaited:
            await session.close()
        else:
            session.close()  # as SQLiteSession.close() is called: this loop waits meanwhile
        with pytest.raises(StoreClosedError):
            await session.add_items([_msg("lost")])
        return store

    store = _in_thread(scenario)
    assert _state(store) == "closed"
    again = EventStoreSession("s", str(tmp_path / "chat.db"))
    assert asyncio.run(again.get_items()) == [_msg("kept")]
    again.close()


def test_a_file_session_dropped_unclosed_closes_its_store(tmp_path: Path) -> None:
    session = EventStoreSession("s", str(tmp_path / "chat.db"))
    loop = asyncio.new_event_loop()  # kept open: the store is not handed on
    try:
        store = loop.run_until_complete(_add_and_locate(session, "kept"))[1]
        del session
        gc.collect()
        deadline = time.monotonic() + DEADLINE
        while _state(store) != "closed":
            assert time.monotonic() < deadline, "the dropped session's store stayed open"
            time.sleep(0.01)
    finally:
        loop.close()
