"""A store belongs to the event loop it was opened on, on every backend: awaited on another
loop (another thread's, or a new one after the first ended) it raises StoreUsageError at once —
never a hang, never a write — and keeps working on its own loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from _evs_support import BackendTarget, run_in_thread

from eventstore import Event, EventStore, MemoryBackend, StoreUsageError

_AT_ONCE = 5.0
"""Seconds a refusal may take at most (it takes microseconds; a hang would take forever)."""


class _LoopThread:
    """An event loop running in a thread of its own (as a worker's or a server's would)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        async def main() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(main(), self.loop).result(timeout=60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def owner() -> Iterator[_LoopThread]:
    thread = _LoopThread()
    yield thread
    thread.stop()


def _refusals(store: EventStore) -> list[Callable[[], Awaitable[Any]]]:
    return [
        lambda: store.get_session("s"),
        lambda: store.append("s", Event(author="user"), expected_version=None),
        lambda: store.read("s"),
        lambda: store.read_mappings("s", compact=True),
        lambda: store.version("s"),
        lambda: store.list_sessions(),
        lambda: store.create_session(app_name="a", user_id="u", session_id="other"),
    ]


async def _each_refused(store: EventStore) -> None:
    for call in _refusals(store):
        with pytest.raises(StoreUsageError, match="another event loop"):
            await asyncio.wait_for(call(), _AT_ONCE)


def test_store_used_from_another_threads_loop_is_refused_at_once(
    backend_target: BackendTarget, owner: _LoopThread
) -> None:
    store: EventStore = owner.run(backend_target.open())
    try:
        owner.run(store.create_session(app_name="a", user_id="u", session_id="s"))
        assert store.loop is owner.loop
        run_in_thread(lambda: _each_refused(store))
        # Nothing was written, and the store goes on working on its own loop.
        assert owner.run(store.version("s")) == 0
        assert [s.id for s in owner.run(store.list_sessions()).sessions] == ["s"]
        owner.run(store.append("s", Event(author="user"), expected_version=0))
        assert owner.run(store.version("s")) == 1
    finally:
        owner.run(store.aclose())


def test_store_used_from_a_later_loop_of_the_same_thread_is_refused_at_once(
    backend_target: BackendTarget,
) -> None:
    first = asyncio.new_event_loop()
    try:
        store = first.run_until_complete(backend_target.open())
        first.run_until_complete(
            store.create_session(app_name="a", user_id="u", session_id="s"))
        asyncio.run(_each_refused(store))  # the way Runner.run_sync starts a loop of its own
        assert first.run_until_complete(store.version("s")) == 0
        first.run_until_complete(store.aclose())
    finally:
        first.close()
    with pytest.raises(StoreUsageError, match="closed"):
        asyncio.run(store.version("s"))


def test_a_store_built_outside_a_loop_belongs_to_the_first_loop_using_it(
    owner: _LoopThread,
) -> None:
    store = EventStore(MemoryBackend())
    assert store.loop is None
    owner.run(store.create_session(app_name="a", user_id="u", session_id="s"))
    assert store.loop is owner.loop
    run_in_thread(lambda: _each_refused(store))
    assert owner.run(store.version("s")) == 0
