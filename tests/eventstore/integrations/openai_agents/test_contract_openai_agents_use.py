"""How the SDK uses a session, on memory, SQLite and PostgreSQL: one session object from many
threads, each running its own event loop (``Runner.run_sync`` from worker threads does this);
bad input refused with TypeError as the SDK's own sessions refuse it, storing nothing; a
``close()`` that is done when it returns; call ids used again after ``clear_session``."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import asyncio  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
from collections.abc import Awaitable, Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from agents.memory.session_settings import SessionSettings  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from eventstore import EventStore, StoreClosedError, StoreUsageError  # noqa: E402
from eventstore.commands import app  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    EventStoreSession,
    SessionItemError,
)

THREADS = 5
PER_THREAD = 6
DEADLINE = 60.0
"""Seconds the threads of one test may take in all: a hang fails the test instead."""


def _msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _in_threads(count: int, work: Callable[[int], Awaitable[Any]]) -> list[Any]:
    """Run ``work(i)`` in ``count`` daemon threads at once, each under ``asyncio.run`` (a
    loop of its own); return their results, or fail if one is not done by DEADLINE."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def main(i: int) -> None:
        start.wait()
        try:
            results[i] = asyncio.run(work(i))  # type: ignore[arg-type]
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} thread(s) still running after {DEADLINE} s: a hang"
    if errors:
        raise errors[0]
    return results


async def _writer(session: EventStoreSession, i: int) -> list[Any]:
    for n in range(PER_THREAD):
        await session.add_items([_msg(f"t{i}-{n}")])
        await session.get_items(limit=2)
    return await session.get_items()


def _check_all_there(items: list[Any]) -> None:
    texts = [item["content"] for item in items]
    assert sorted(texts) == sorted(f"t{i}-{n}" for i in range(THREADS) for n in range(PER_THREAD))
    for i in range(THREADS):  # each thread's items in the order it added them
        mine = [t for t in texts if t.startswith(f"t{i}-")]
        assert mine == [f"t{i}-{n}" for n in range(PER_THREAD)]


def test_one_session_from_five_threads_each_with_its_own_loop(
    backend_target: BackendTarget,
) -> None:
    session = EventStoreSession("s", backend_target.url)
    try:
        _in_threads(THREADS, lambda i: _writer(session, i))
        items = asyncio.run(session.get_items())
        _check_all_there(items)
        # pop and clear from threads too, while others read
        popped = _in_threads(THREADS, lambda i: session.pop_item())
        assert len({p["content"] for p in popped}) == THREADS
        assert len(asyncio.run(session.get_items())) == THREADS * PER_THREAD - THREADS
        _in_threads(2, lambda i: session.clear_session() if i == 0 else session.get_items())
        assert asyncio.run(session.get_items()) == []
    finally:
        session.close()


def test_a_session_lives_on_after_the_loop_that_first_used_it(
    backend_target: BackendTarget,
) -> None:
    session = EventStoreSession("s", backend_target.url)
    asyncio.run(session.add_items([_msg("first loop")]))  # that loop is closed afterwards
    assert asyncio.run(session.get_items()) == [_msg("first loop")]
    asyncio.run(session.add_items([_msg("third loop")]))
    assert asyncio.run(session.get_items(limit=1)) == [_msg("third loop")]
    session.close()


class _OwnerLoop:
    """A loop running in a thread of its own, where a given store is opened."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        async def main() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(main(), self.loop).result(timeout=DEADLINE)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture
def owner() -> Iterator[_OwnerLoop]:
    thread = _OwnerLoop()
    yield thread
    thread.stop()
    thread.loop.close()


def test_a_given_store_is_used_on_its_own_loop_from_other_threads(
    backend_target: BackendTarget, owner: _OwnerLoop
) -> None:
    store: EventStore = owner.run(backend_target.open())
    try:
        session = EventStoreSession("s", store)
        _in_threads(THREADS, lambda i: _writer(session, i))
        _check_all_there(owner.run(session.get_items()))
        session.close()  # a given store stays open
        assert len(owner.run(store.read("s"))) == THREADS * PER_THREAD
    finally:
        owner.run(store.aclose())


def test_a_given_store_whose_loop_stopped_is_refused_at_once(
    backend_target: BackendTarget, owner: _OwnerLoop
) -> None:
    store: EventStore = owner.run(backend_target.open())
    session = EventStoreSession("s", store)
    owner.run(session.add_items([_msg("kept")]))
    owner.stop()

    async def use() -> None:
        with pytest.raises(StoreUsageError, match="no longer runs"):
            await asyncio.wait_for(session.get_items(), 5)
        with pytest.raises(StoreUsageError, match="no longer runs"):
            await asyncio.wait_for(session.add_items([_msg("lost")]), 5)

    _in_threads(1, lambda i: use())
    owner.thread = threading.Thread(target=owner.loop.run_forever, daemon=True)
    owner.thread.start()
    assert owner.run(session.get_items()) == [_msg("kept")]  # nothing written meanwhile
    owner.run(store.aclose())


class _Opaque:
    pass


@pytest.mark.parametrize("items", [
    pytest.param({"role": "user", "content": "hi"}, id="a-mapping-not-a-list"),
    pytest.param("hello", id="a-string"),
    pytest.param(None, id="none"),
    pytest.param(["hello"], id="an-item-that-is-a-string"),
    pytest.param([5], id="an-item-that-is-a-number"),
    pytest.param([{"role": "user", "content": _Opaque()}], id="an-object"),
    pytest.param([{"role": "user", "content": {1, 2}}], id="a-set"),
    pytest.param([{"role": "user", "content": b"raw"}], id="bytes"),
    pytest.param([{"role": "user", "content": float("nan")}], id="nan"),
    pytest.param([{"role": "user", "content": [1.0, float("inf")]}], id="infinity"),
    pytest.param([{"role": "user", 1: "numbered"}], id="a-key-that-is-not-a-string"),
    pytest.param([_msg("fine"), {"role": "user", "content": _Opaque()}], id="one-bad-of-two"),
])
def test_add_items_refuses_what_json_cannot_keep_and_stores_nothing(
    backend_target: BackendTarget, items: Any
) -> None:
    session = EventStoreSession("s", backend_target.url)

    async def scenario() -> None:
        await session.add_items([_msg("before")])
        with pytest.raises(SessionItemError) as caught:
            await session.add_items(items)
        assert isinstance(caught.value, TypeError)  # as the SDK's sessions raise
        assert isinstance(caught.value, StoreUsageError)
        assert await session.get_items() == [_msg("before")]
        await session.add_items([_msg("after")])  # still usable
        assert await session.get_items() == [_msg("before"), _msg("after")]

    try:
        asyncio.run(scenario())
    finally:
        session.close()


def test_add_items_names_where_the_bad_value_is() -> None:
    session = EventStoreSession("s")
    bad = [_msg("ok"), {"role": "user", "content": [{"type": "input_text", "text": _Opaque()}]}]
    with pytest.raises(SessionItemError, match=r"item 1 holds a _Opaque at \$\.content\[0\]\.text"
                       ) as caught:
        asyncio.run(session.add_items(bad))
    assert (caught.value.index, caught.value.path) == (1, "$.content[0].text")
    session.close()


def test_tuples_are_kept_as_lists_as_json_keeps_them() -> None:
    session = EventStoreSession("s")

    async def scenario() -> None:
        await session.add_items((_msg("a"), {"role": "user", "content": ("x", "y")}))
        assert await session.get_items() == [_msg("a"), {"role": "user", "content": ["x", "y"]}]

    asyncio.run(scenario())
    session.close()


def test_settings_and_limits_of_the_wrong_type_raise_type_error() -> None:
    assert EventStoreSession("s", session_settings={"limit": 1}).session_settings == (
        SessionSettings(limit=1))
    assert EventStoreSession("s", session_settings={}).session_settings == SessionSettings()
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        EventStoreSession("s", session_settings={"limitt": 1})
    with pytest.raises(TypeError, match="must be a SessionSettings or a mapping"):
        EventStoreSession("s", session_settings=5)  # type: ignore[arg-type]
    session = EventStoreSession("s", session_settings={"limit": 1})

    async def scenario() -> None:
        await session.add_items([_msg("a"), _msg("b")])
        assert await session.get_items() == [_msg("b")]
        for limit in ("2", 1.5, True):
            with pytest.raises(TypeError, match="limit must be an int or None"):
                await session.get_items(limit=limit)  # type: ignore[arg-type]

    asyncio.run(scenario())
    session.close()


def test_close_is_done_when_it_returns_and_the_session_refuses_use_after(
    backend_target: BackendTarget,
) -> None:
    session = EventStoreSession("s", backend_target.url)
    asyncio.run(session.add_items([_msg("kept")]))
    session.close()  # not awaited, as SQLiteSession.close() is called

    async def after() -> None:
        await session.close()  # awaiting it works as well, and closing twice is harmless
        for call in (lambda: session.get_items(), lambda: session.add_items([_msg("x")]),
                     lambda: session.add_items([]), lambda: session.pop_item(),
                     lambda: session.clear_session()):
            with pytest.raises(StoreClosedError):
                await call()

    asyncio.run(after())
    if backend_target.persistent:  # what it wrote was committed and closed cleanly
        again = EventStoreSession("s", backend_target.url)
        assert asyncio.run(again.get_items()) == [_msg("kept")]
        again.close()


def _turn(n: int) -> list[dict[str, Any]]:
    """One turn of a tool-using conversation; the SDK numbers call ids afresh after a clear."""
    return [
        _msg(f"weather? {n}"),
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}', "id": f"fc_{n}"},
        {"type": "function_call_output", "call_id": "call_1", "output": f"sunny {n}"},
        {"role": "assistant", "type": "message", "content": [
            {"type": "output_text", "text": f"It is sunny {n}"}]},
    ]


def test_call_ids_used_again_after_a_clear(backend_target: BackendTarget) -> None:
    session = EventStoreSession("chat", backend_target.url)

    async def scenario() -> None:
        await session.add_items(_turn(0))
        await session.clear_session()
        await session.add_items(_turn(1)[:2])
        await session.add_items(_turn(1)[2:])
        assert await session.get_items() == _turn(1)
        assert await session.get_items(limit=2) == _turn(1)[2:]
        assert await session.pop_item() == _turn(1)[3]
        assert await session.pop_item() == _turn(1)[2]
        await session.add_items(_turn(1)[2:])
        assert await session.get_items() == _turn(1)

    asyncio.run(scenario())
    session.close()
    if not backend_target.persistent:
        return
    runner = CliRunner()
    shown = runner.invoke(app, ["show", "chat", "--db", backend_target.url])
    assert shown.exit_code == 0, shown.output
    assert "sunny 0" in shown.output  # both turns, in order
    assert "sunny 1" in shown.output
    assert shown.output.index("sunny 0") < shown.output.index("sunny 1")
    verified = runner.invoke(app, ["verify", "chat", "--db", backend_target.url, "--json"])
    # The log itself is sound (seqs, ids, hash chain, state); what a reader may still say
    # about the id used in both turns is about call ids only.
    assert verified.exit_code in (0, 3), verified.output
    report = json.loads(verified.output)
    codes = {finding["code"] for finding in report["findings"]}
    assert codes <= {"duplicate_call_id", "answered_twice"}, report
