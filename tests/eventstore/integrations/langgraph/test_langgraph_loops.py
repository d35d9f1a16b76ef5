"""Which loop a saver opened from a URL works on: its async methods on the caller's loop (no
thread hop), its sync methods on a loop thread of its own, both on the same threads; a loop
that stopped hands over to the next one."""

from __future__ import annotations

from _extras import require_extra

langgraph = require_extra("langgraph", "langgraph")

import asyncio  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _evs_support import BackendTarget  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402

from eventstore import EventStore, StoreClosedError  # noqa: E402
from eventstore.integrations.langgraph import EventStoreSaver  # noqa: E402

import pytest  # noqa: E402  # isort: skip


def _config(thread: str, cid: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid is not None:
        configurable["checkpoint_id"] = cid
    return {"configurable": configurable}


def _checkpoint(value: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": value}
    checkpoint["channel_versions"] = {"a": str(value)}
    return checkpoint


def _saver_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "eventstore-langgraph"]


async def _async_store(saver: EventStoreSaver) -> EventStore:
    async def store(threads: Any) -> EventStore:
        return await threads.store()  # type: ignore[no-any-return]
    return await saver._home.run(store)


async def test_async_calls_of_a_url_saver_run_on_the_callers_loop(tmp_path: Path) -> None:
    before = _saver_threads()
    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        config = await saver.aput(_config("t"), _checkpoint(1), {}, {"a": "1"})
        await saver.aput_writes(config, [("a", 2)], "task")
        got = await saver.aget_tuple(_config("t"))
        assert got is not None
        assert got.pending_writes == [("task", "a", 2)]
        assert (await _async_store(saver)).loop is asyncio.get_running_loop()
        assert _saver_threads() == before  # no loop thread was started for them


async def test_sync_and_async_calls_of_one_saver_see_each_other(backend_target: BackendTarget
                                                                ) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        first = await saver.aput(_config("t"), _checkpoint(1), {}, {"a": "1"})
        # From a worker thread (as LangGraph's sync API calls it), then on this loop's own
        # thread: the sync store lives on the saver's loop thread, so neither waits for us.
        second = await asyncio.to_thread(saver.put, first, _checkpoint(2), {}, {"a": "2"})
        saver.put_writes(second, [("a", 3)], "task")
        got = await saver.aget_tuple(_config("t"))
        assert got is not None
        assert got.checkpoint["channel_values"] == {"a": 2}
        assert got.pending_writes == [("task", "a", 3)]
        third = await saver.aput(second, _checkpoint(3), {}, {"a": "3"})
        seen = saver.get_tuple(_config("t"))
        assert seen is not None
        assert seen.config == third
        assert [c.checkpoint["channel_values"]["a"] async for c in saver.alist(_config("t"))
                ] == [3, 2, 1]


def test_a_url_saver_follows_asyncio_run_to_the_next_loop(tmp_path: Path) -> None:
    saver = EventStoreSaver(str(tmp_path / "s.db"))
    config = asyncio.run(saver.aput(_config("t"), _checkpoint(1), {}, {"a": "1"}))
    # The first loop is closed: its store cannot be awaited there any more.
    got = asyncio.run(saver.aget_tuple(_config("t")))
    assert got is not None
    assert got.config == config
    asyncio.run(saver.aput_writes(config, [("a", 2)], "task"))
    again = saver.get_tuple(_config("t"))
    assert again is not None
    assert again.pending_writes == [("task", "a", 2)]
    saver.close()
    with pytest.raises(StoreClosedError):
        asyncio.run(saver.aget_tuple(_config("t")))


async def test_a_memory_saver_keeps_one_store_for_both_apis() -> None:
    async with EventStoreSaver() as saver:
        config = await saver.aput(_config("t"), _checkpoint(1), {}, {"a": "1"})
        got = await asyncio.to_thread(saver.get_tuple, _config("t"))
        assert got is not None
        assert got.config == config


async def test_closing_a_saver_on_its_async_loop_closes_its_store(tmp_path: Path) -> None:
    saver = EventStoreSaver(str(tmp_path / "s.db"))
    with saver:  # close() on the loop its async store lives on: it cannot wait there
        await saver.aput(_config("t"), _checkpoint(1), {}, {"a": "1"})
        store = await _async_store(saver)
    for _ in range(500):  # closed by a task on this loop, soon
        try:
            await store.read("t")
        except StoreClosedError:
            return
        await asyncio.sleep(0.01)
    pytest.fail("the store of a closed saver is still open")
