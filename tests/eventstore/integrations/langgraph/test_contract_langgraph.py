"""The LangGraph checkpointer on memory, SQLite and PostgreSQL: LangGraph's own conformance
suite (every base and extended capability), then the saver's own promises: append-only
events, list channels stored as appends (bytes flat per step), pending writes bound to their
checkpoint, encrypted values, the sync methods from plain threads, several savers on one file."""

from __future__ import annotations

from _extras import require_extra

require_extra("langgraph.checkpoint.conformance", "dev")
langgraph = require_extra("langgraph", "langgraph")

import asyncio  # noqa: E402
import threading  # noqa: E402
import uuid  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402
import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint  # noqa: E402
from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer  # noqa: E402

from eventstore import StoreUsageError, open_store  # noqa: E402
from eventstore.integrations.langgraph import METADATA_KEY, EventStoreSaver  # noqa: E402


def _config(thread: str, cid: str | None = None, ns: str = "") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        configurable["checkpoint_id"] = cid
    return {"configurable": configurable}


async def _on_store(saver: EventStoreSaver, call: Any) -> Any:
    """``await call(store)`` on the loop the saver's async store lives on."""
    async def run(threads: Any) -> Any:
        return await call(await threads.store())
    return await saver._home.run(run)


async def _events(saver: EventStoreSaver, thread: str) -> list[Any]:
    return await _on_store(saver, lambda store: store.read(thread))  # type: ignore[no-any-return]


def _checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions
    return checkpoint


async def test_conformance_every_capability(backend_target: BackendTarget) -> None:
    @checkpointer_test(name=f"EventStoreSaver-{backend_target.name}")
    async def saver() -> AsyncIterator[EventStoreSaver]:
        opened = EventStoreSaver(backend_target.url)
        yield opened
        await opened.aclose()

    report = await validate(saver)
    outcome = {name: (r.detected, r.passed, r.tests_passed, r.tests_failed, r.failures)
               for name, r in report.results.items()}
    assert len(outcome) == 8, outcome
    for name, (detected, passed, _, failed, failures) in outcome.items():
        assert detected, f"{name} not detected"
        assert passed, (name, failures)
        assert failed == 0, (name, failures)
    assert sum(r.tests_passed for r in report.results.values()) == 81


async def test_each_put_and_put_writes_is_one_appended_event(backend_target: BackendTarget
                                                             ) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        first = await saver.aput(_config("t"), _checkpoint({"a": 1}, {"a": "1"}),
                                 {"source": "input", "step": -1}, {"a": "1"})
        await saver.aput_writes(first, [("a", 2)], "task-1")
        await saver.aput(first, _checkpoint({"a": 2}, {"a": "2"}),
                         {"source": "loop", "step": 0}, {"a": "2"})
        events = await _events(saver, "t")
        kinds = [e.custom_metadata[METADATA_KEY]["t"] for e in events]
        assert kinds == ["checkpoint", "writes", "checkpoint"]
        assert all(e.author == "langgraph" for e in events)
        assert "step 0 (loop)" in (events[2].text() or "")
        assert "a=2" in (events[1].text() or "")
        info = await _on_store(saver, lambda store: store.session_info("t"))
        assert info.app_name == "langgraph"


async def _grow(saver: EventStoreSaver, thread: str, steps: int) -> list[int]:
    """Put ``steps`` checkpoints whose ``messages`` list gains one element each (as a
    messages graph does); returns each checkpoint event's stored size."""
    config = _config(thread)
    messages: list[str] = []
    version: str | None = None
    for step in range(steps):
        messages = [*messages, f"message number {step} " + "x" * 40]
        version = saver.get_next_version(version, None)
        config = await saver.aput(config, _checkpoint({"messages": messages, "step": step},
                                                      {"messages": version, "step": version}),
                                  {"source": "loop", "step": step},
                                  {"messages": version, "step": version})
    return [len(orjson.dumps(e.custom_metadata)) for e in await _events(saver, thread)]


async def test_a_growing_list_is_stored_as_appends(backend_target: BackendTarget) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        sizes = await _grow(saver, "long", 120)
        # The first stores the whole (one-element) list; later ones the appended element only.
        assert max(sizes[1:]) - min(sizes[1:]) < 64, sizes  # a whole copy: +55 a step
        tup = await saver.aget_tuple(_config("long"))
        assert tup is not None
        assert len(tup.checkpoint["channel_values"]["messages"]) == 120
        assert tup.checkpoint["channel_values"]["step"] == 119
    if backend_target.persistent:  # a fresh process folds the appends from the log
        async with EventStoreSaver(backend_target.url) as fresh:
            history = [t async for t in fresh.alist(_config("long"))]
            assert [len(t.checkpoint["channel_values"]["messages"]) for t in history] == list(
                range(120, 0, -1))
            assert history[0].checkpoint["channel_values"]["messages"][-1].startswith(
                "message number 119 ")


async def test_a_list_that_is_not_an_append_is_stored_whole(tmp_path: Any) -> None:
    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        one = await saver.aput(_config("t"), _checkpoint({"m": ["a", "b"]}, {"m": "1"}), {},
                               {"m": "1"})
        two = await saver.aput(one, _checkpoint({"m": ["b", "c"]}, {"m": "2"}), {}, {"m": "2"})
        three = await saver.aput(two, _checkpoint({"m": ["b", "c", "d"]}, {"m": "3"}), {},
                                 {"m": "3"})
        blobs = [e.custom_metadata[METADATA_KEY]["blobs"][0][2]
                 for e in await _events(saver, "t")]
        assert blobs == ["v", "v", "x"]
    async with EventStoreSaver(str(tmp_path / "s.db")) as fresh:
        for config, expected in [(one, ["a", "b"]), (two, ["b", "c"]), (three, ["b", "c", "d"])]:
            tup = await fresh.aget_tuple(config)
            assert tup is not None
            assert tup.checkpoint["channel_values"]["m"] == expected


async def test_values_handed_out_are_new_containers(tmp_path: Any) -> None:
    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        config = await saver.aput(_config("t"), _checkpoint({"m": ["a"]}, {"m": "1"}), {},
                                  {"m": "1"})
        got = await saver.aget_tuple(config)
        assert got is not None
        got.checkpoint["channel_values"]["m"].append("changed")
        again = await saver.aget_tuple(config)
        assert again is not None
        assert again.checkpoint["channel_values"]["m"] == ["a"]


async def test_what_a_caller_edits_after_a_put_is_not_what_the_saver_reads(
        tmp_path: Any) -> None:
    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        held = [{"text": "first"}]
        config = await saver.aput(_config("t"), _checkpoint({"m": held}, {"m": "1"}), {},
                                  {"m": "1"})
        held.append({"text": "second"})
        config = await saver.aput(config, _checkpoint({"m": held}, {"m": "2"}), {},
                                  {"m": "2"})
        held[0]["text"] = "edited"  # the saver kept bytes, decoded only now
        held[1]["text"] = "edited"
        got = await saver.aget_tuple(config)
        assert got is not None
        assert got.checkpoint["channel_values"]["m"] == [{"text": "first"}, {"text": "second"}]


async def test_writes_belong_to_their_checkpoint_only(backend_target: BackendTarget) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        root = await saver.aput(_config("t"), _checkpoint({}, {}), {}, {})
        left = await saver.aput(root, _checkpoint({}, {}), {"source": "fork"}, {})
        right = await saver.aput(root, _checkpoint({}, {}), {"source": "fork"}, {})
        await saver.aput_writes(left, [("x", "left")], "task")
        await saver.aput_writes(right, [("x", "right")], "task")
        for config, value in [(left, "left"), (right, "right")]:
            tup = await saver.aget_tuple(config)
            assert tup is not None
            assert tup.pending_writes == [("task", "x", value)]
        tup = await saver.aget_tuple(root)
        assert tup is not None
        assert tup.pending_writes == []


class _XorCipher:
    """A stand-in cipher for the test (not encryption): flips every byte."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


async def test_an_encrypting_serializer_sees_every_value(tmp_path: Any) -> None:
    serde = EncryptedSerializer(_XorCipher())
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path, serde=serde) as saver:
        config = await saver.aput(
            _config("t"), _checkpoint({"m": ["secret-one"]}, {"m": "1"}),
            {"source": "input", "note": "secret-meta"}, {"m": "1"})
        config = await saver.aput(config, _checkpoint({"m": ["secret-one", "secret-two"]},
                                                       {"m": "2"}), {}, {"m": "2"})
        await saver.aput_writes(config, [("m", "secret-write")], "task")
    async with await open_store(path) as store:
        raw = b"".join(orjson.dumps(e.custom_metadata) + (e.text() or "").encode()
                       for e in await store.read("t"))
        assert b"secret" not in raw
    async with EventStoreSaver(path, serde=serde) as again:
        tup = await again.aget_tuple(_config("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["m"] == ["secret-one", "secret-two"]
        assert tup.pending_writes == [("task", "m", "secret-write")]
        first = [t async for t in again.alist(_config("t"))][-1]
        assert first.metadata["note"] == "secret-meta"


def test_sync_methods_from_threads_without_a_loop(backend_target: BackendTarget) -> None:
    saver = EventStoreSaver(backend_target.url)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            config = saver.put(_config(f"t{n}"), _checkpoint({"n": n}, {"n": "1"}), {},
                               {"n": "1"})
            saver.put_writes(config, [("n", n + 1)], "task")
            tup = saver.get_tuple(_config(f"t{n}"))
            assert tup is not None
            assert tup.checkpoint["channel_values"] == {"n": n}
            assert tup.pending_writes == [("task", "n", n + 1)]
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(list(saver.list(None))) == 6
    saver.delete_thread("t0")
    assert saver.get_tuple(_config("t0")) is None
    saver.close()
    saver.close()


async def test_a_given_store_stays_open_and_sync_calls_reach_its_loop(tmp_path: Any) -> None:
    store = await open_store(str(tmp_path / "s.db"), auto_upgrade=True)
    saver = EventStoreSaver(store)
    config = await saver.aput(_config("t"), _checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
    with pytest.raises(StoreUsageError, match="would wait for itself"):
        saver.get_tuple(config)
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(saver.get_tuple(config)))
    thread.start()
    while thread.is_alive():
        await saver.aget_tuple(config)  # keeps this loop turning while the thread waits on it
    thread.join()
    assert got[0].checkpoint["channel_values"] == {"a": 1}
    await saver.aclose()
    assert len(await store.read("t")) == 1  # still open
    await store.aclose()


async def test_a_given_store_before_any_async_call_refuses_sync_use(tmp_path: Any) -> None:
    store = await open_store(str(tmp_path / "s.db"), auto_upgrade=True)
    saver = EventStoreSaver(store)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            saver.get_tuple(_config("t"))
        except StoreUsageError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert "call an async method first" in str(outcome[0])
    await store.aclose()


async def test_a_session_of_another_app_is_not_a_thread(tmp_path: Any) -> None:
    path = str(tmp_path / "s.db")
    async with await open_store(path, auto_upgrade=True) as store:
        await store.create_session(app_name="adk-app", user_id="u", session_id="shared")
    async with EventStoreSaver(path) as saver:
        assert await saver.aget_tuple(_config("shared")) is None
        await saver.adelete_thread("shared")  # no such thread: nothing to delete
        assert [t async for t in saver.alist(None)] == []
    async with await open_store(path) as store:
        assert (await store.session_info("shared")).app_name == "adk-app"


async def test_two_savers_on_one_file_see_each_other(tmp_path: Any) -> None:
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as a, EventStoreSaver(path) as b:
        one = await a.aput(_config("t"), _checkpoint({"m": ["x"]}, {"m": "1"}), {}, {"m": "1"})
        assert (await b.aget_tuple(_config("t"))) is not None
        two = await a.aput(one, _checkpoint({"m": ["x", "y"]}, {"m": "2"}), {}, {"m": "2"})
        tup = await b.aget_tuple(_config("t"))
        assert tup is not None
        assert tup.config == two
        assert tup.checkpoint["channel_values"]["m"] == ["x", "y"]
        await a.adelete_thread("t")
        assert await b.aget_tuple(_config("t")) is None
        fresh = await a.aput(_config("t"), _checkpoint({"m": ["z"]}, {"m": "1"}), {}, {"m": "1"})
        tup = await b.aget_tuple(_config("t"))  # a new session of the same id: folded anew
        assert tup is not None
        assert tup.config == fresh
        assert tup.checkpoint["channel_values"]["m"] == ["z"]


async def test_copy_thread_is_a_fork_of_the_session(tmp_path: Any) -> None:
    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        config = await saver.aput(_config("src"), _checkpoint({"m": ["a"]}, {"m": "1"}), {},
                                  {"m": "1"})
        await saver.aput_writes(config, [("m", "w")], "task")
        await saver.acopy_thread("src", "dst")
        links = await _on_store(saver, lambda store: store.fork_links("dst"))
        assert links.origin is not None
        assert links.origin.origin_session_id == "src"
        tup = await saver.aget_tuple(_config("dst"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"m": ["a"]}
        assert tup.pending_writes == [("task", "m", "w")]
        await saver.aput(tup.config, _checkpoint({"m": ["a", "b"]}, {"m": "2"}), {},
                         {"m": "2"})
        source = await saver.aget_tuple(_config("src"))
        assert source is not None
        assert source.checkpoint["channel_values"] == {"m": ["a"]}


async def test_prune_keep_latest_keeps_what_the_latest_is_built_from(tmp_path: Any) -> None:
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as saver:
        await _grow(saver, "t", 10)
        await saver.aprune(["t"], strategy="keep_latest")
        with pytest.raises(StoreUsageError, match="'keep_latest' or 'delete'"):
            await saver.aprune(["t"], strategy="everything")
        kinds = [e.custom_metadata[METADATA_KEY]["t"] for e in await _events(saver, "t")]
        assert kinds == ["checkpoint"] * 10 + ["drop"]
    async with EventStoreSaver(path) as fresh:
        listed = [t async for t in fresh.alist(_config("t"))]
        assert len(listed) == 1
        assert len(listed[0].checkpoint["channel_values"]["messages"]) == 10


def test_get_next_version_increases_and_differs_between_branches() -> None:
    saver = EventStoreSaver()
    one = saver.get_next_version(None, None)
    two = saver.get_next_version(one, None)
    assert one < two
    assert saver.get_next_version(one, None) != two
    assert saver.get_next_version(7, None).startswith(f"{8:032}.")
    saver.close()


def test_a_config_without_thread_id_is_refused() -> None:
    with EventStoreSaver() as saver, pytest.raises(StoreUsageError, match="thread_id"):
        saver.get_tuple({"configurable": {}})


def test_using_a_closed_saver_raises() -> None:
    saver = EventStoreSaver()
    saver.close()
    from eventstore import StoreClosedError
    with pytest.raises(StoreClosedError):
        saver.get_tuple(_config(str(uuid.uuid4())))


def test_setup_opens_the_store_before_first_use(tmp_path: Any) -> None:
    path = tmp_path / "s.db"
    with EventStoreSaver(str(path)) as saver:
        assert not path.exists()
        saver.setup()
        saver.setup()
        assert path.exists()
        assert saver.get_tuple(_config("t")) is None


async def test_asetup_opens_the_store_before_first_use(tmp_path: Any) -> None:
    path = tmp_path / "s.db"
    async with EventStoreSaver(str(path)) as saver:
        await saver.asetup()
        assert path.exists()


async def test_a_put_never_appends_to_another_apps_session(tmp_path: Any) -> None:
    """A thread's id taken by another app's session names a different session: the saver
    makes its own thread and leaves the other app's log alone."""
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as saver:
        assert await saver.aget_tuple(_config("shared")) is None  # no such thread yet
        async with await open_store(path) as store:  # then another app takes the id
            await store.create_session(app_name="adk-app", user_id="u", session_id="shared")
        stored = await saver.aput(_config("shared"), _checkpoint({}, {}), {}, {})
        got = await saver.aget_tuple(_config("shared"))
        assert got is not None
        assert got.config == stored
    async with await open_store(path) as store:
        assert await store.read("shared", app_name="adk-app", user_id="u") == []
        assert len(await store.read("shared", app_name="langgraph", user_id="langgraph")) == 1


async def test_summaries_sketch_values_cheaply(tmp_path: Any) -> None:
    from langchain_core.messages import AIMessage

    async with EventStoreSaver(str(tmp_path / "s.db")) as saver:
        config = await saver.aput(_config("t"), _checkpoint({}, {}), {}, {})
        await saver.aput_writes(config, [("messages", [AIMessage(content="hello there")]),
                                         ("count", 3), ("big", list(range(50))),
                                         ("nested", {"a": {"b": {"c": 1}}})],
                                "task", "~__pregel_pull, answer")
        [_, writes] = await _events(saver, "t")
        text = writes.text() or ""
        assert text.startswith("writes of answer task task on checkpoint ")
        assert "messages=[AIMessage('hello there')]" in text
        assert "count=3" in text
        assert "big=[0, 1, 2, …]" in text
        assert "nested={'a': {'b': {1 keys}}}" in text


_OPS = st.lists(
    st.tuples(st.sampled_from(["append", "replace", "truncate", "same", "fork", "drop"]),
              st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=40)),
    min_size=1, max_size=25,
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, int_versions=st.booleans())
@example(ops=[("append", 1, 0), ("append", 1, 5), ("fork", 0, 0), ("append", 2, 7)],
         int_versions=True)  # two branches store version 2: each loads its own
async def test_every_checkpoint_loads_as_put_hot_and_from_the_log(ops: list[Any],
                                                                  int_versions: bool) -> None:
    """Checkpoints of a list channel (appends, replacements, truncations, unchanged, forks
    from older checkpoints) and a scalar one: each loads with the values it was put with, from
    the writing saver (its resolved lists) and from a fresh one (folding the log), also after
    a prune that hides all but the newest. Integer versions (as LangGraph's default
    ``get_next_version``) repeat across branches: the parent chain decides."""
    store = await open_store("memory://")
    writer, reader = EventStoreSaver(store), EventStoreSaver(store)
    puts: list[tuple[dict[str, Any], list[Any], int, Any, Any]] = []
    parent: dict[str, Any] = _config("t")
    items: list[Any] = []
    version = m_version = None
    for kind, n, pick in ops:
        if kind == "fork" and puts:
            parent, items, _, m_version, version = puts[pick % len(puts)]
            items = list(items)
            continue
        if kind == "drop" and puts:
            await writer.aprune(["t"], strategy="keep_latest")
            puts = puts[-1:]
            continue
        if kind == "append":
            items = [*items, *(f"m{len(puts)}.{i}" for i in range(n))]
        elif kind == "replace":
            items = [pick, *items[:n]]
        elif kind == "truncate":
            items = items[:n]
        version = ((version or 0) + 1 if int_versions
                   else writer.get_next_version(version, None))
        changed: dict[str, Any] = {"n": version}
        if kind != "same" or m_version is None:
            m_version = changed["m"] = version
        versions = {"m": m_version, "n": version}
        parent = await writer.aput(parent, _checkpoint({"m": items, "n": pick}, versions), {},
                                   changed)
        puts.append((parent, list(items), pick, m_version, version))
    for saver in (writer, reader):
        for config, expected, scalar, _, _ in puts:
            tup = await saver.aget_tuple(config)
            assert tup is not None
            assert tup.checkpoint["channel_values"] == {"m": expected, "n": scalar}
        listed = [t async for t in saver.alist(_config("t"))]
        assert {t.config["configurable"]["checkpoint_id"] for t in listed} >= {
            c["configurable"]["checkpoint_id"] for c, _, _, _, _ in puts[-1:]}
        by_config = {p[0]["configurable"]["checkpoint_id"]: p for p in puts}
        for tup in listed:
            put = by_config.get(tup.config["configurable"]["checkpoint_id"])
            if put is not None:
                assert tup.checkpoint["channel_values"] == {"m": put[1], "n": put[2]}
    await store.aclose()


async def test_closing_an_unused_saver_on_a_given_store(tmp_path: Any) -> None:
    store = await open_store(str(tmp_path / "s.db"), auto_upgrade=True)
    saver = EventStoreSaver(store)
    await asyncio.to_thread(saver.close)  # never used: nothing to reach, nothing to close
    assert (await store.list_sessions()).sessions == []  # the store is still open
    await store.aclose()


async def test_a_put_on_a_thread_deleted_elsewhere_starts_it_anew(tmp_path: Any) -> None:
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as a, EventStoreSaver(path) as b:
        old = await b.aput(_config("t"), _checkpoint({"n": 1}, {"n": "1"}), {}, {"n": "1"})
        await b.aput(old, _checkpoint({"n": 2}, {"n": "2"}), {}, {"n": "2"})
        await a.adelete_thread("t")
        new = await b.aput(_config("t"), _checkpoint({"n": 3}, {"n": "3"}), {}, {"n": "3"})
        assert [t.config async for t in b.alist(_config("t"))] == [new]
        assert [t.config async for t in a.alist(_config("t"))] == [new]


async def test_a_run_continuing_on_a_thread_deleted_elsewhere_stores_whole_values(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as a, EventStoreSaver(path) as b:
        one = await b.aput(_config("t"), _checkpoint({"m": ["x"]}, {"m": "1"}), {}, {"m": "1"})
        await a.adelete_thread("t")
        two = await b.aput(one, _checkpoint({"m": ["x", "y"]}, {"m": "2"}), {}, {"m": "2"})
        for saver in (a, b):
            tup = await saver.aget_tuple(_config("t"))
            assert tup is not None
            assert tup.config == two
            assert tup.checkpoint["channel_values"] == {"m": ["x", "y"]}
