"""What one new LangGraph thread costs the store: its session is created once, by the first
write (an append that creates it, folding no state), even when LangGraph puts the first
checkpoint and writes at once, and the writes put at once go in that same append; a thread is
found with one read."""

from __future__ import annotations

from _extras import require_extra

langgraph = require_extra("langgraph", "langgraph")

import asyncio  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

from _evs_support import BackendTarget  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.langgraph import METADATA_KEY, EventStoreSaver  # noqa: E402


def _counted(store: EventStore, names: tuple[str, ...]) -> Counter[str]:
    """Count the calls of the store's ``names`` methods (the real methods still run)."""
    calls: Counter[str] = Counter()
    for name in names:
        real = getattr(store, name)

        async def counting(*args: Any, _real: Any = real, _name: str = name,
                           **kwargs: Any) -> Any:
            calls[f"{_name}(create)" if kwargs.get("create") else _name] += 1
            return await _real(*args, **kwargs)

        setattr(store, name, counting)
    return calls


async def test_concurrent_first_writes_create_the_thread_once(backend_target: BackendTarget
                                                              ) -> None:
    store = await backend_target.open()
    try:
        await _first_writes_at_once(store)
    finally:
        await store.aclose()


async def _first_writes_at_once(store: EventStore) -> None:
    calls = _counted(store, ("create_session", "append"))
    saver = EventStoreSaver(store)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": 1}
    checkpoint["channel_versions"] = {"a": "1"}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "",
                               "checkpoint_id": checkpoint["id"]}}
    await asyncio.gather(
        saver.aput({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint,
                   {"source": "input", "step": -1}, {"a": "1"}),
        *(saver.aput_writes(config, [("a", i)], f"task-{i}") for i in range(3)),
    )
    # One append: the writes were queued behind the checkpoint before it was sent.
    assert calls == {"append(create)": 1}
    events = await store.read("t")
    assert sorted(e.custom_metadata[METADATA_KEY]["t"] for e in events) == [
        "checkpoint", "writes", "writes", "writes"]
    got = await saver.aget_tuple(config)
    assert got is not None
    assert sorted(v for _, _, v in got.pending_writes) == [0, 1, 2]
    await saver.aclose()


async def test_a_thread_is_found_with_one_read(backend_target: BackendTarget) -> None:
    store = await backend_target.open()
    try:
        await _found_with_one_read(store)
    finally:
        await store.aclose()


async def _found_with_one_read(store: EventStore) -> None:
    async with EventStoreSaver(store) as first:
        checkpoint = empty_checkpoint()
        await first.aput({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint,
                         {"source": "input", "step": -1}, {})
    calls = _counted(store, ("session_info", "read_mappings"))
    async with EventStoreSaver(store) as second:  # knows nothing of the thread yet
        assert await second.aget_tuple({"configurable": {"thread_id": "t"}}) is not None
        assert await second.aget_tuple({"configurable": {"thread_id": "new"}}) is None
    assert calls == {"read_mappings": 2}


async def test_writes_and_the_checkpoint_after_them_share_one_append(
        backend_target: BackendTarget) -> None:
    """A task's writes wait (``WRITES_WAIT``) for the checkpoint LangGraph puts after them,
    and go in its append; writes that no checkpoint follows are stored all the same."""
    store = await backend_target.open()
    try:
        saver = EventStoreSaver(store)
        first = empty_checkpoint()
        config = await saver.aput({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                                  first, {"source": "input", "step": -1}, {})
        calls = _counted(store, ("append",))
        second = empty_checkpoint()
        second["channel_values"] = {"a": 1}
        second["channel_versions"] = {"a": "1"}

        async def put_after_a_moment() -> Any:
            await asyncio.sleep(0)
            return await saver.aput(config, second, {"source": "loop", "step": 0}, {"a": "1"})

        _, child = await asyncio.gather(saver.aput_writes(config, [("a", 1)], "task"),
                                        put_after_a_moment())
        assert calls == {"append": 1}
        await saver.aput_writes(child, [("a", 2)], "task")  # alone: waits, then is sent
        assert calls == {"append": 2}
        got = await saver.aget_tuple(child)
        assert got is not None
        assert got.pending_writes == [("task", "a", 2)]
        parent = await saver.aget_tuple(config)
        assert parent is not None
        assert parent.pending_writes == [("task", "a", 1)]
        await saver.aclose()
    finally:
        await store.aclose()
