"""Compaction of an OpenAI Agents session on memory, SQLite and PostgreSQL: the summary items
stand for the history in ``get_items()`` while the log keeps every item; the Runner compacts
through the SDK's compaction protocol (``run_compaction``, deferred past tool turns); a call
still waiting for its output is never summarized."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import asyncio  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from agents import Agent, Runner, function_tool  # noqa: E402
from agents.memory import is_openai_responses_compaction_aware_session  # noqa: E402
from agents.testing import ScriptedModel  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from typer.testing import CliRunner  # noqa: E402

from eventstore import EventStore, StoreUsageError  # noqa: E402
from eventstore.commands import app  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    METADATA_KEY,
    CompactionRequest,
    EventStoreSession,
    ResponsesCompactor,
)


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


SUMMARY = {"type": "compaction", "encrypted_content": "enc-1"}


class _Compactor:
    """Summarizes to one opaque compaction item, keeping the user messages (as
    ``responses.compact`` does); records what it was asked."""

    def __init__(self) -> None:
        self.requests: list[CompactionRequest] = []

    async def __call__(self, request: CompactionRequest) -> list[Any]:
        self.requests.append(request)
        users = [i for i in request.items if i.get("role") == "user"]
        return [*users, {"type": "compaction", "encrypted_content": f"enc-{len(self.requests)}"}]


def _items(log: list[Any]) -> list[Any]:
    """Every item ever added to the session, in log order (summary items included)."""
    return [e.custom_metadata[METADATA_KEY]["item"] for e in log
            if "item" in e.custom_metadata.get(METADATA_KEY, {})]


async def test_compact_serves_the_summary_and_keeps_every_item(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    history = [_msg("user", f"q{i}") for i in range(5)]
    await session.add_items(history)
    seq = await session.compact([SUMMARY])
    await session.add_items([_msg("user", "after")])
    assert await session.get_items() == [SUMMARY, _msg("user", "after")]
    assert await session.get_items(limit=1) == [_msg("user", "after")]
    # A fresh object (no cache) reads the same from the log, which keeps every item.
    fresh = EventStoreSession("s", store)
    assert await fresh.get_items() == [SUMMARY, _msg("user", "after")]
    log = await store.read("s")
    assert _items(log) == [*history, SUMMARY, _msg("user", "after")]
    marker = log[seq - 1]
    assert marker.actions.compaction is not None
    assert (marker.actions.compaction.start_seq, marker.actions.compaction.end_seq) == (1, 5)
    assert (await store.read_compacted("s")).compaction == marker
    # Pops work on the summary items like on any other; nothing before the compaction returns.
    assert await fresh.pop_item() == _msg("user", "after")
    assert await fresh.pop_item() == SUMMARY
    assert await fresh.pop_item() is None
    assert await session.get_items() == []


async def test_a_second_compaction_starts_after_the_first(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    await session.add_items([_msg("user", "a"), _msg("user", "b")])
    first = await session.compact([SUMMARY])
    await session.add_items([_msg("user", "c")])
    second = await session.compact([{"type": "compaction", "encrypted_content": "enc-2"}])
    log = await store.read("s")
    record = log[second - 1].actions.compaction
    assert record is not None
    assert (record.start_seq, record.end_seq) == (3, first + 2)
    assert await EventStoreSession("s", store).get_items() == [
        {"type": "compaction", "encrypted_content": "enc-2"}]


async def test_compact_refuses_nothing_to_compact(store: EventStore) -> None:
    session = EventStoreSession("s", store)
    with pytest.raises(StoreUsageError):
        await session.compact([SUMMARY])
    await session.add_items([_msg("user", "a")])
    with pytest.raises(StoreUsageError):
        await session.compact([])
    assert len(await store.read("s")) == 1


async def test_run_compaction_follows_the_hook_and_skips_open_calls(store: EventStore) -> None:
    plain = EventStoreSession("s", store)
    assert is_openai_responses_compaction_aware_session(plain)
    await plain.run_compaction({"response_id": "r"})  # no compactor: nothing happens
    with pytest.raises(StoreUsageError):
        await plain.run_compaction({"force": True})
    compactor = _Compactor()
    seen: list[dict[str, Any]] = []
    session = EventStoreSession("s", store, compactor=compactor,
                                should_trigger_compaction=lambda ctx: bool(seen.append(ctx)))
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    await session.add_items([_msg("user", "weather?"), call])
    await session.run_compaction({"response_id": "r1"})
    assert [c["response_id"] for c in seen] == ["r1"]
    assert seen[0]["session_items"] == [_msg("user", "weather?"), call]
    assert seen[0]["compaction_candidate_items"] == [call]
    await session.run_compaction({"force": True})  # the call has no output yet
    assert compactor.requests == []
    await session.add_items([{"type": "function_call_output", "call_id": "c1",
                              "output": "sunny"}])
    await session.run_compaction({"force": True})
    assert [r.items[-1]["output"] for r in compactor.requests] == ["sunny"]
    assert await session.get_items() == [
        _msg("user", "weather?"), {"type": "compaction", "encrypted_content": "enc-1"}]
    assert len(_items(await store.read("s"))) == 5


def _text(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])])


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_the_runner_compacts_after_the_turn_and_sends_summary_plus_tail(
    store: EventStore,
) -> None:
    compactor = _Compactor()
    session = EventStoreSession("chat", store, compactor=compactor,
                                should_trigger_compaction=lambda ctx: True)
    call = ResponseFunctionToolCall(id="fc_1", call_id="call_1", type="function_call",
                                    name="get_weather", arguments='{"city": "Paris"}')
    model = ScriptedModel([[call], [_text("Sunny in Paris.", 1)], [_text("You're welcome.", 2)]])
    agent = Agent(name="weather", model=model, tools=[get_weather])
    await Runner.run(agent, "Weather in Paris?", session=session)
    # The tool turn deferred the compaction; the final answer's turn made it, once, from the
    # whole turn (the call and its output together).
    assert len(compactor.requests) == 1
    kinds = [i.get("type") for i in compactor.requests[0].items]
    assert kinds[1:] == ["function_call", "function_call_output", "message"]
    summary = [_msg("user", "Weather in Paris?"),
               {"type": "compaction", "encrypted_content": "enc-1"}]
    assert await session.get_items() == summary
    await Runner.run(agent, "Thanks!", session=EventStoreSession("chat", store))
    sent = model.last_call.input if model.last_call else None
    assert isinstance(sent, list)
    assert [i.get("type") or i.get("role") for i in sent] == ["user", "compaction", "user"]
    assert sent[1]["encrypted_content"] == "enc-1"
    log = await store.read("chat", app_name="openai-agents", user_id="default")
    texts = [i.get("content") for i in _items(log) if i.get("role") == "user"]
    assert texts[0] == "Weather in Paris?"
    assert any(i.get("type") == "function_call_output" for i in _items(log))  # still there


async def test_responses_compactor_calls_responses_compact(store: EventStore) -> None:
    asked: list[dict[str, Any]] = []

    async def compact(**kwargs: Any) -> Any:
        asked.append(kwargs)
        return SimpleNamespace(output=[{"type": "compaction", "encrypted_content": "srv"}],
                               usage=None)

    client = SimpleNamespace(responses=SimpleNamespace(compact=compact))
    session = EventStoreSession("s", store, compactor=ResponsesCompactor(client=client))
    await session.add_items([_msg("user", "hi"), _msg("assistant", "hello")])
    await session.run_compaction({"force": True})
    assert asked == [{"model": "gpt-4.1", "input": [_msg("user", "hi"),
                                                    _msg("assistant", "hello")]}]
    assert await session.get_items() == [{"type": "compaction", "encrypted_content": "srv"}]
    by_id = EventStoreSession("s", store, compactor=ResponsesCompactor(
        client=client, mode="previous_response_id"))
    with pytest.raises(StoreUsageError):
        await by_id.run_compaction({"force": True})
    await by_id.run_compaction({"force": True, "response_id": "resp_9"})
    assert asked[-1] == {"model": "gpt-4.1", "previous_response_id": "resp_9"}


def test_evs_show_and_export_keep_the_compacted_items(sql_target: BackendTarget) -> None:
    backend_target = sql_target  # the CLI opens the database itself: a file or a server
    session = EventStoreSession("chat", backend_target.url)

    async def scenario() -> None:
        await session.add_items([_msg("user", "the first question"), _msg("assistant", "a1")])
        await session.compact([SUMMARY])
        await session.add_items([_msg("user", "the second question")])

    asyncio.run(scenario())
    session.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["show", "chat", "--db", backend_target.url])
    assert shown.exit_code == 0, shown.output
    assert "the first question" in shown.output
    assert "compaction" in shown.output.lower()
    assert shown.output.index("the first question") < shown.output.index("the second question")
    exported = runner.invoke(app, ["export", "chat", "--db", backend_target.url])
    assert exported.exit_code == 0, exported.output
    assert "the first question" in exported.output
    assert "enc-1" in exported.output


async def test_a_saved_cache_from_before_the_compaction_is_folded_past_it(
    store: EventStore,
) -> None:
    writer = EventStoreSession("s", store)
    await writer.add_items([_msg("user", f"q{i}") for i in range(300)])
    assert len(await writer.get_items()) == 300  # folds 300 events: saves the store's cache
    await writer.compact([SUMMARY])
    await writer.add_items([_msg("user", "after")])
    assert await EventStoreSession("s", store).get_items() == [SUMMARY, _msg("user", "after")]
    assert await writer.get_items() == [SUMMARY, _msg("user", "after")]
