"""The loop a URL saver's sync methods run on (``SharedLoop``): the callers run it in turn,
in their own threads; many threads at once all get their answers, errors reach their caller,
a thread running another loop is served, and ``close`` refuses later calls."""

from __future__ import annotations

from _extras import require_extra

require_extra("langgraph.checkpoint.base", "langgraph")

import asyncio  # noqa: E402
import random  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

from eventstore import StoreClosedError  # noqa: E402
from eventstore.integrations.langgraph.loop import SharedLoop  # noqa: E402

import pytest  # noqa: E402  # isort: skip


async def _answer(value: int, *, pause: float = 0.0) -> tuple[int, int]:
    await asyncio.sleep(pause)
    return value, threading.get_ident()


def test_a_lone_caller_runs_its_job_in_its_own_thread() -> None:
    shared = SharedLoop()
    try:
        assert shared.run(_answer(1)) == (1, threading.get_ident())
    finally:
        shared.close()


def test_many_threads_at_once_each_get_their_own_answer() -> None:
    shared = SharedLoop()
    lock = threading.Lock()
    answers: dict[int, list[int]] = {}

    def work(n: int) -> None:
        rng = random.Random(n)
        got = [shared.run(_answer(n * 1000 + i, pause=rng.choice((0.0, 0.0, 0.001))))[0]
               for i in range(40)]
        with lock:
            answers[n] = got

    threads = [threading.Thread(target=work, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert not any(thread.is_alive() for thread in threads)
        assert answers == {n: [n * 1000 + i for i in range(40)] for n in range(20)}
    finally:
        shared.close()


def _append_run(into: list[str], shared: SharedLoop, coro: Any) -> None:
    into.append(shared.run(coro))


def test_a_job_waiting_for_another_callers_job_gets_it_whoever_runs_the_loop() -> None:
    shared = SharedLoop()
    event = asyncio.Event()
    started = threading.Event()

    async def wait_for_it() -> str:
        started.set()
        await event.wait()
        return "woken"

    async def set_it() -> str:
        event.set()
        return "set"

    try:
        for _ in range(50):
            event.clear()
            started.clear()
            got: list[str] = []
            waiter = threading.Thread(target=_append_run, args=(got, shared, wait_for_it()))
            waiter.start()
            started.wait(10)
            assert shared.run(set_it()) == "set"
            waiter.join(10)
            assert got == ["woken"]
    finally:
        shared.close()


def test_a_job_that_raises_raises_in_its_caller_and_the_loop_goes_on() -> None:
    shared = SharedLoop()

    async def fail() -> None:
        await asyncio.sleep(0)
        raise KeyError("gone")

    try:
        with pytest.raises(KeyError, match="gone"):
            shared.run(fail())
        assert shared.run(_answer(2))[0] == 2
    finally:
        shared.close()


async def test_a_caller_on_another_running_loop_is_served_from_a_thread() -> None:
    shared = SharedLoop()
    try:
        value, thread = shared.run(_answer(3))
        assert value == 3
        assert thread != threading.get_ident()
    finally:
        shared.close()


def test_after_close_a_call_raises_store_closed() -> None:
    shared = SharedLoop()
    shared.run(_answer(4))
    shared.close()
    coro = _answer(5)
    with pytest.raises(StoreClosedError):
        shared.run(coro)
