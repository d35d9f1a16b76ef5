"""The OpenAI Agents SDK ``Session`` protocol on our store, on memory, SQLite and PostgreSQL:
the behaviour of the SDK's own ``SQLiteSession`` (compared operation by operation), append-only
underneath (pop and clear are events), and reads that stop early."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import contextlib  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from agents.memory import Session, SQLiteSession  # noqa: E402
from agents.memory.session_settings import SessionSettings  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eventstore import (  # noqa: E402
    Content,
    Event,
    EventStore,
    FunctionCall,
    MemoryBackend,
    Part,
    SessionNotFoundError,
    StoredEvent,
    StoreUsageError,
)
from eventstore.commands._verify import check_events  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    CACHE_NAME,
    METADATA_KEY,
    EventStoreSession,
    mirrored_call_id,
)
from eventstore.integrations.openai_agents import session as openai_session  # noqa: E402


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


async def test_implements_the_session_protocol(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    assert isinstance(session, Session)
    assert session.session_id == "s"
    assert session.session_settings == SessionSettings()


async def test_add_get_limit_pop_clear(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()  # nothing to clear: no error
    items = [_msg("user", f"m{i}") for i in range(5)]
    await session.add_items(items[:2])
    await session.add_items(items[2:])
    await session.add_items([])
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[3:]
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == items
    assert await session.get_items(limit=50) == items
    assert await session.pop_item() == items[4]
    assert await session.pop_item() == items[3]
    assert await session.get_items() == items[:3]
    await session.add_items([_msg("assistant", "new")])
    assert await session.get_items(limit=2) == [items[2], _msg("assistant", "new")]
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items([items[0]])
    assert await session.get_items() == [items[0]]


async def test_pop_and_clear_are_events_and_nothing_is_deleted(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    await session.add_items([_msg("user", "a"), _msg("user", "b")])
    await session.pop_item()
    await session.clear_session()
    log = await store.read("s")
    meanings = [e.custom_metadata[METADATA_KEY] for e in log]
    assert meanings == [
        {"item": _msg("user", "a")}, {"item": _msg("user", "b")}, {"pop": 2}, {"clear": True}
    ]
    assert [e.text() for e in log[:2]] == ["a", "b"]


async def test_items_are_mirrored_natively(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    await session.add_items([
        {"type": "function_call", "call_id": "c1", "name": "weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"role": "assistant", "type": "message",
         "content": [{"type": "output_text", "text": "It is sunny."}]},
        {"type": "reasoning", "id": "r1", "summary": []},
    ])
    log = await store.read("s")
    [call] = log[0].function_calls()
    assert (call.id, call.name, call.args) == (
        mirrored_call_id("c1", log[0].id), "weather", {"city": "Paris"}
    )
    [response] = log[1].function_responses()
    assert (response.id, response.response) == (call.id, {"output": "sunny"})
    assert log[2].text() == "It is sunny."
    assert log[3].content is None
    assert (await session.get_items())[3] == {"type": "reasoning", "id": "r1", "summary": []}


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "weather",
            "arguments": f'{{"city": "{city}"}}'}


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


async def test_reused_sdk_call_ids_are_mirrored_unique_and_paired(store: EventStore) -> None:
    # A server numbering each response's calls (call_0 twice in one batch), then call_0 again
    # after clear_session, then outputs that arrive in a later batch than their calls.
    session = EventStoreSession("s", store)
    await session.add_items([_call("call_0", "Paris"), _call("call_0", "Oslo"),
                             _output("call_0", "sunny"), _output("call_0", "rain")])
    await session.clear_session()
    await session.add_items([_call("call_0", "Rome"), _call("call_0", "Lima")])
    await session.add_items([_output("call_0", "hot"), _output("call_0", "mild")])
    log = await store.read("s")
    calls = {c.id: c.args["city"] for e in log for c in e.function_calls()}
    assert len(calls) == 4
    answers = {r.id: r.response["output"] for e in log for r in e.function_responses()}
    assert {calls[i]: out for i, out in answers.items()} == {
        "Paris": "sunny", "Oslo": "rain", "Rome": "hot", "Lima": "mild"
    }
    assert check_events("s", log) == []
    # The SDK gets its items back exactly, with its own ids.
    assert await session.get_items() == [_call("call_0", "Rome"), _call("call_0", "Lima"),
                                         _output("call_0", "hot"), _output("call_0", "mild")]


async def test_an_output_answers_the_open_call_of_an_old_mirror(store: EventStore) -> None:
    # A log written before mirrored ids were unique holds calls under the SDK's id.
    old = Event(author="assistant",
                content=Content(role="model", parts=(Part(function_call=FunctionCall(
                    id="c1", name="weather", args={"city": "Paris"})),)),
                custom_metadata={METADATA_KEY: {"item": _call("c1", "Paris")}})
    await store.create_session(app_name="openai-agents", user_id="default", session_id="s")
    await store.append("s", [old], expected_version=0)
    await EventStoreSession("s", store).add_items([_output("c1", "sunny")])
    log = await store.read("s")
    assert [r.id for r in log[1].function_responses()] == ["c1"]
    assert check_events("s", log) == []


async def test_two_objects_share_one_session_and_settings_limit(store: EventStore) -> None:
    writer = EventStoreSession("s", store)
    reader = EventStoreSession("s", store, SessionSettings(limit=1))
    await writer.add_items([_msg("user", "a"), _msg("user", "b")])
    assert await reader.get_items() == [_msg("user", "b")]
    assert await reader.get_items(limit=5) == [_msg("user", "a"), _msg("user", "b")]
    assert await reader.pop_item() == _msg("user", "b")
    assert await writer.get_items() == [_msg("user", "a")]


async def test_a_url_opens_and_closes_its_own_store(tmp_path: Any) -> None:
    session = EventStoreSession("s", str(tmp_path / "chat.db"))
    await session.add_items([_msg("user", "kept")])
    await session.close()
    again = EventStoreSession("s", str(tmp_path / "chat.db"))
    assert await again.get_items() == [_msg("user", "kept")]
    await again.close()


class _CountingBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0

    async def read(self, session_id: str, **options: Any) -> list[StoredEvent]:
        rows = await super().read(session_id, **options)
        self.rows_read += len(rows)
        return rows


async def test_reads_stop_at_the_newest_clear_and_at_the_limit() -> None:
    backend = _CountingBackend()
    store = EventStore(backend)
    session = EventStoreSession("s", store)
    await session.add_items([_msg("user", str(i)) for i in range(2000)])
    backend.rows_read = 0
    assert len(await session.get_items(limit=3)) == 3
    assert backend.rows_read < 20
    await session.clear_session()
    await session.add_items([_msg("user", "after")])
    backend.rows_read = 0
    assert await session.get_items() == [_msg("user", "after")]
    assert backend.rows_read < 600  # one page, not the 2,002 events of the log
    await store.aclose()


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=0, max_value=3)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("get"), st.sampled_from([None, 0, 1, 2, 5, -1])),
    ),
    max_size=25,
)


@pytest.mark.parametrize("backend", ["memory"])
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
async def test_behaves_like_the_sdks_sqlite_session(backend: str, ops: list[Any]) -> None:
    theirs = SQLiteSession("s")
    ours = EventStoreSession("s", f"{backend}://")
    counter = 0
    try:
        for op, arg in ops:
            if op == "add":
                batch = [_msg("user", f"i{counter + n}") for n in range(arg)]
                counter += arg
                await theirs.add_items(batch)
                await ours.add_items(batch)
            elif op == "pop":
                assert await ours.pop_item() == await theirs.pop_item()
            elif op == "clear":
                await theirs.clear_session()
                await ours.clear_session()
            else:
                assert await ours.get_items(arg) == await theirs.get_items(arg)
        assert await ours.get_items() == await theirs.get_items()
    finally:
        theirs.close()
        await ours.close()


def _fold(log: list[Any]) -> list[Any]:
    """The items at head of a log, folded from scratch (the definition the cache must meet)."""
    items: dict[int, Any] = {}
    for event in log:
        meaning = event.custom_metadata.get(METADATA_KEY, {})
        if meaning.get("clear") is True or "compaction" in meaning:
            items = {}  # a compaction's summary items are the item events after it
        elif "pop" in meaning:
            items.pop(meaning["pop"], None)
        elif "item" in meaning:
            items[event.seq] = meaning["item"]
    return list(items.values())


_CACHE_OPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["reader", "writer"]), st.just("add"),
                  st.integers(min_value=1, max_value=3)),
        st.tuples(st.sampled_from(["reader", "writer"]), st.just("pop"), st.just(0)),
        st.tuples(st.sampled_from(["reader", "writer"]), st.just("clear"), st.just(0)),
        st.tuples(st.sampled_from(["reader", "writer"]), st.just("compact"),
                  st.integers(min_value=1, max_value=2)),
        st.tuples(st.just("store"), st.just("delete"), st.just(0)),
    ),
    max_size=20,
)


@pytest.mark.parametrize("save_after", [1, 3, 10**9], ids=["save-always", "save-3", "never"])
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_CACHE_OPS)
async def test_the_cache_at_head_equals_a_rebuild_from_the_log(
    ops: list[Any], save_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # save_after: fresh objects read (and save) the store's cache of the items at head.
    monkeypatch.setattr(openai_session, "_SAVE_AFTER", save_after)
    store = EventStore(MemoryBackend())
    sessions = {"reader": EventStoreSession("s", store), "writer": EventStoreSession("s", store)}
    counter = 0
    for who, op, arg in ops:
        if op == "delete":
            with contextlib.suppress(SessionNotFoundError):
                await store.delete_session("s")
        elif op == "add":
            await sessions[who].add_items([_msg("user", f"i{counter + n}") for n in range(arg)])
            counter += arg
        elif op == "pop":
            await sessions[who].pop_item()
        elif op == "compact":
            summary = [{"type": "compaction", "encrypted_content": f"c{counter + n}"}
                       for n in range(arg)]
            counter += arg
            with contextlib.suppress(StoreUsageError):  # no items to compact
                await sessions[who].compact(summary)
        else:
            await sessions[who].clear_session()
        cached = await sessions["reader"].get_items()  # refreshed incrementally when cached
        try:
            log = await store.read("s")
        except SessionNotFoundError:
            log = []
        assert cached == _fold(log) == await EventStoreSession("s", store).get_items()
        if log and cached:
            assert sessions["reader"]._cache is not None  # the cache path is what was checked
        assert await sessions["reader"].get_items(limit=2) == _fold(log)[-2:]
    await store.aclose()


async def test_got_items_are_copies(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    await session.add_items([{"role": "user", "content": [{"type": "input_text", "text": "a"}]}])
    got = await session.get_items()
    got[0]["content"][0]["text"] = "changed"
    assert (await session.get_items())[0]["content"][0]["text"] == "a"


async def test_a_fresh_object_answers_from_the_saved_cache_checked_against_the_log(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_session, "_SAVE_AFTER", 3)
    writer = EventStoreSession("s", store)
    items = [_msg("user", f"m{i}") for i in range(6)]
    await writer.add_items(items[:2])
    assert await writer.get_items() == items[:2]
    assert await store.load_cache("s", CACHE_NAME) is None  # 2 events folded: not worth it
    await writer.add_items(items[2:])
    assert await EventStoreSession("s", store).get_items() == items
    saved = await store.load_cache("s", CACHE_NAME)
    assert saved is not None
    assert saved[0] == 6

    # The saved cache is what answers a fresh object once its event matches the log's...
    head = (await store.read("s", upto=6))[-1]
    forged = b'["' + head.id.encode() + b'",[1]]\n[{"role":"user","content":"cached"}]'
    await store.save_cache("s", CACHE_NAME, 6, forged)
    assert await EventStoreSession("s", store).get_items() == [_msg("user", "cached")]
    # ...and is ignored when it does not: another event id at its seq, a seq past head,
    # bytes it did not write.
    for seq, data in ((6, forged.replace(head.id.encode(), b"other-id")), (7, forged),
                      (6, b"not a cache"), (6, forged[:-1])):
        await store.save_cache("s", CACHE_NAME, seq, data)
        assert await EventStoreSession("s", store).get_items() == items
    assert await store.rebuild_snapshots() >= 1
    assert await store.load_cache("s", CACHE_NAME) is None
    assert await EventStoreSession("s", store).get_items() == items

    # Events after the cache (adds, a pop, a clear) are folded onto it.
    await EventStoreSession("s", store).get_items()
    other = EventStoreSession("s", store)
    await other.add_items([_msg("assistant", "late")])
    assert await other.pop_item() == _msg("assistant", "late")
    await other.add_items([_msg("assistant", "later")])
    assert await EventStoreSession("s", store).get_items() == [*items, _msg("assistant", "later")]
    await other.clear_session()
    assert await EventStoreSession("s", store).get_items() == []
    await store.delete_session("s")
    assert await store.load_cache("s", CACHE_NAME) is None
