"""Memory over past sessions: full-text search per app and user, derived from the log.

Runs on every backend (memory, a SQLite file with FTS5, PostgreSQL with tsvector).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from _evs_support import BackendTarget

from eventstore import (
    Content,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    MemoryService,
    Part,
    SessionNotFoundError,
    open_store,
)


def _user(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


def _model(text: str) -> Event:
    return Event(author="planner", content=Content(role="model", parts=(Part(text=text),)))


def _call() -> Event:
    return Event(
        author="planner",
        content=Content(
            role="model",
            parts=(Part(function_call=FunctionCall(id="c1", name="get_weather",
                                                    args={"city": "Kyoto"})),),
        ),
    )


def _answer() -> Event:
    return Event(
        author="planner",
        content=Content(
            role="user",
            parts=(Part(function_response=FunctionResponse(
                id="c1", name="get_weather", response={"condition": "drizzle"})),),
        ),
    )


async def _session(store: EventStore, sid: str, *events: Event, app: str = "trips",
                   user: str = "ada") -> None:
    await store.create_session(app_name=app, user_id=user, session_id=sid)
    await store.append(sid, list(events), expected_version=0)


async def test_memory_search_finds_text_calls_and_results(store: EventStore) -> None:
    await _session(store, "s1", _user("I love hiking in Kyoto"), _call(), _answer(),
                   _model("Pack an umbrella."), Event(author="planner"))
    memory = MemoryService(store)
    assert await memory.add_session_to_memory("s1") == 4  # the event without content is skipped

    found = await memory.search_memory(app_name="trips", user_id="ada", query="KYOTO hiking?")
    assert {(e.session_id, e.seq, e.author) for e in found} == {
        ("s1", 1, "user"), ("s1", 2, "planner")}
    assert found[0].seq == 1  # both words match the user's text: it ranks first
    assert found[0].text == "I love hiking in Kyoto"
    [call] = [e for e in found if e.seq == 2]
    assert call.text == 'get_weather called with {"city":"Kyoto"}'
    [result] = await memory.search_memory(app_name="trips", user_id="ada", query="drizzle")
    assert (result.seq, result.text) == (3, 'get_weather returned {"condition":"drizzle"}')
    [umbrella] = await memory.search_memory(app_name="trips", user_id="ada", query="umbrella")
    assert umbrella.author == "planner"
    assert umbrella.seq == 4


async def test_memory_words_match_by_prefix(store: EventStore) -> None:
    await _session(store, "s1", _user("Night trains to Vienna"))
    memory = MemoryService(store)
    await memory.add_session_to_memory("s1")
    for query in ("train", "TRAINS", "vie", "night"):
        found = await memory.search_memory(app_name="trips", user_id="ada", query=query)
        assert [e.seq for e in found] == [1], query
    assert await memory.search_memory(app_name="trips", user_id="ada", query="rains") == []


async def test_memory_is_scoped_per_app_and_user(store: EventStore) -> None:
    await _session(store, "ada-1", _user("secret plan: Lisbon"))
    await _session(store, "bob-1", _user("my own Lisbon trip"), user="bob")
    await _session(store, "other-app", _user("Lisbon in another app"), app="work")
    memory = MemoryService(store)
    for sid in ("ada-1", "bob-1", "other-app"):
        await memory.add_session_to_memory(sid)

    def ids(entries: list[object]) -> list[str]:
        return [e.session_id for e in entries]  # type: ignore[attr-defined]

    assert ids(await memory.search_memory(app_name="trips", user_id="ada", query="lisbon")) == [
        "ada-1"]
    assert ids(await memory.search_memory(app_name="trips", user_id="bob", query="lisbon")) == [
        "bob-1"]
    assert ids(await memory.search_memory(app_name="work", user_id="ada", query="lisbon")) == [
        "other-app"]
    assert await memory.search_memory(app_name="trips", user_id="eve", query="lisbon") == []


async def test_memory_covers_what_was_added_until_added_again(store: EventStore) -> None:
    await _session(store, "s1", _user("first about Oslo"))
    memory = MemoryService(store)
    await memory.add_session_to_memory(await store.get_session("s1"))
    await store.append("s1", [_user("then about Bergen")], expected_version=1)
    assert await memory.search_memory(app_name="trips", user_id="ada", query="bergen") == []
    await memory.add_session_to_memory("s1")
    [found] = await memory.search_memory(app_name="trips", user_id="ada", query="bergen")
    assert found.seq == 2
    assert [e.seq for e in await memory.entries("s1")] == [1, 2]
    # never remembered: not searchable
    await _session(store, "s2", _user("Bergen again"))
    assert [e.session_id for e in await memory.search_memory(
        app_name="trips", user_id="ada", query="bergen")] == ["s1"]


@pytest.mark.parametrize(
    "query",
    [
        pytest.param('"unbalanced', id="quote"),
        pytest.param("NEAR(a b) OR AND NOT *", id="fts-syntax"),
        pytest.param("a & b | !c :* <->", id="tsquery-syntax"),
        pytest.param("", id="empty"),
        pytest.param("   ?!  ", id="no-words"),
    ],
)
async def test_memory_query_syntax_never_reaches_the_database(
    store: EventStore, query: str
) -> None:
    await _session(store, "s1", _user("a b c near and not unbalanced"))
    memory = MemoryService(store)
    await memory.add_session_to_memory("s1")
    found = await memory.search_memory(app_name="trips", user_id="ada", query=query)
    assert [e.session_id for e in found] == (["s1"] if query.strip(" ?!") else [])


async def test_memory_goes_with_its_session(store: EventStore) -> None:
    await _session(store, "s1", _user("ferry to Stavanger"))
    memory = MemoryService(store)
    await memory.add_session_to_memory("s1")
    await store.delete_session("s1")
    assert await memory.search_memory(app_name="trips", user_id="ada", query="ferry") == []
    assert await memory.entries("s1") == []
    with pytest.raises(SessionNotFoundError):
        await memory.add_session_to_memory("s1")


async def test_memory_rebuild_from_the_log_equals_the_index(store: EventStore) -> None:
    await _session(store, "s1", _user("I love hiking in Kyoto"), _call(), _answer())
    await _session(store, "s2", _user("Lisbon trams"), user="bob")
    memory = MemoryService(store)
    await memory.add_session_to_memory("s1")
    await memory.add_session_to_memory("s2")
    await store.append("s1", [_user("not added: Osaka")], expected_version=3)
    before = [await memory.entries("s1"), await memory.entries("s2")]
    search_before = await memory.search_memory(app_name="trips", user_id="ada", query="kyoto")

    assert await store.backend.clear_memory_rows() == 4
    assert await memory.search_memory(app_name="trips", user_id="ada", query="kyoto") == []
    done = await memory.rebuild()

    assert (done.sessions, done.rows, done.dropped) == (2, 4, 0)
    assert [await memory.entries("s1"), await memory.entries("s2")] == before
    assert await memory.search_memory(app_name="trips", user_id="ada", query="kyoto") == (
        search_before)
    assert await memory.search_memory(app_name="trips", user_id="ada", query="osaka") == []


def test_memory_rebuild_command(sql_target: BackendTarget) -> None:
    from typer.testing import CliRunner

    from eventstore.commands import app

    async def setup() -> None:
        async with await open_store(sql_target.url, auto_upgrade=True) as store:
            await _session(store, "s1", _user("glacier walk"), _model("Bring crampons."))
            await MemoryService(store).add_session_to_memory("s1")
            await store.backend.clear_memory_rows()  # lose the derived rows
            assert await MemoryService(store).entries("s1") == []

    asyncio.run(setup())
    result = CliRunner().invoke(app, ["memory", "rebuild", "--db", sql_target.url, "--json"])
    assert result.exit_code == 0, result.output
    assert '"rows": 2' in result.output
    searched = CliRunner().invoke(
        app, ["memory", "search", "trips", "ada", "crampons", "--db", sql_target.url])
    assert searched.exit_code == 0, searched.output
    assert "s1  seq 2  planner: Bring crampons." in searched.output
    other = CliRunner().invoke(
        app, ["memory", "search", "trips", "bob", "crampons", "--db", sql_target.url])
    assert "No remembered event matches." in other.output
    if sql_target.name == "sqlite":
        with sqlite3.connect(sql_target.url.removeprefix("sqlite+aiosqlite:///")) as conn:
            [(hits,)] = conn.execute(
                "SELECT count(*) FROM evs_memory_fts WHERE evs_memory_fts MATCH 'glacier'")
        assert hits == 1


def test_memory_search_usage_names_arguments_in_capitals() -> None:
    from typer.testing import CliRunner

    from eventstore.commands import app

    missing = CliRunner().invoke(app, ["memory", "search"])
    assert missing.exit_code == 2
    assert "Missing argument 'APP'" in missing.output
    assert "app_name" not in missing.output
    usage = CliRunner().invoke(app, ["memory", "search", "--help"])
    assert "memory search [OPTIONS] APP USER QUERY" in usage.output
