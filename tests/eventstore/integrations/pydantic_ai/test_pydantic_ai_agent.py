"""``EventStoreAgent`` on SQLite files and PostgreSQL: a chat is one session, a crash inside a
step resumes from the log (recorded responses not asked again, recorded results not run again,
in-doubt calls answered by ``evs respond`` / ``evs rerun``), approvals through ``evs confirm``,
external results through ``evs respond``."""

from __future__ import annotations

import asyncio
import warnings

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from _pai import Crash, deferring_agent, evs, order_agent, pending  # noqa: E402
from pydantic_ai import (  # noqa: E402
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    ExternalToolset,
    RunContext,
)
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.tools import ToolDefinition  # noqa: E402

from eventstore import CallLedger, open_store  # noqa: E402
from eventstore.integrations.pydantic_ai import (  # noqa: E402
    IN_DOUBT_KEY,
    EventStoreAgent,
    messages_of,
)
from eventstore.integrations.pydantic_ai.messages import artifact_refs  # noqa: E402


def _dump(messages: list[ModelMessage]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


async def _conversation(db: str, session: str) -> list[ModelMessage]:
    """The session's conversation, files put back from its artifacts."""
    async with await open_store(db) as store:
        events = (await store.get_session(session)).events
        contents = {ref: (await store.load_artifact(session, ref[0], version=ref[1])).data
                    for ref in artifact_refs(events)}
    return messages_of(events, contents)


async def _events(db: str, session: str) -> list[Any]:
    async with await open_store(db) as store:
        return (await store.get_session(session)).events


async def test_pydantic_ai_chat_is_one_session_across_restarts(tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    seen: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    first = EventStoreAgent(Agent(FunctionModel(model), name="chat"), store=db)
    one = await first.run("Hi", session_id="c1")
    await first.aclose()
    second = EventStoreAgent(Agent(FunctionModel(model), name="chat"), store=db)
    two = await second.run("And again?", session_id="c1")
    await second.aclose()
    assert seen == [1, 3]  # the second run saw the first run's request and response
    assert two.output == "answer 3"
    loaded = messages_of(await _events(db, "c1"))
    assert _dump(loaded) == _dump(two.all_messages())
    assert _dump(loaded[:2]) == _dump(one.all_messages())


async def test_pydantic_ai_crash_in_a_tool_resumes_without_repeats(tmp_path: Path) -> None:
    db = str(tmp_path / "crash.db")
    ran: list[str] = []
    model_calls: list[int] = []
    agent = EventStoreAgent(order_agent(ran=ran, crash_in={"lookup"}, model_calls=model_calls),
                            store=db, idempotent_tools=["lookup"])
    with pytest.raises(Crash):
        await agent.run("Buy the book", session_id="s")
    # lookup is idempotent: it runs again; the model is not asked for the recorded turn again
    paused = await agent.run(None, session_id="s")
    assert isinstance(paused.output, DeferredToolRequests)
    assert [c.tool_name for c in paused.output.approvals] == ["ship"]
    assert ran == ["lookup", "lookup", "charge"]
    assert model_calls == [0, 1, 2]
    [item] = pending(db, "s")
    assert item["kind"] == "confirmation"
    assert item["tool"] == "ship"
    evs("confirm", "s", item["confirmation_id"], "--yes", db=db)
    done = await agent.run(None, session_id="s")
    assert done.output == "done: shipped book"
    assert ran == ["lookup", "lookup", "charge", "ship"]
    assert model_calls == [0, 1, 2, 3]
    assert done.usage.requests == 1  # only what this run really sent
    assert pending(db, "s") == []
    await agent.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["respond", "rerun"])
async def test_pydantic_ai_in_doubt_call_waits_for_evs(tmp_path: Path, answer: str) -> None:
    db = str(tmp_path / "doubt.db")
    ran: list[str] = []
    agent = EventStoreAgent(order_agent(ran=ran, crash_in={"charge"}), store=db)
    with pytest.raises(Crash):
        await agent.run("Buy the book", session_id="s")
    waiting = await agent.run(None, session_id="s")
    assert isinstance(waiting.output, DeferredToolRequests)
    assert [c.tool_name for c in waiting.output.calls] == ["charge"]
    assert waiting.output.metadata["c2"][IN_DOUBT_KEY] is True
    assert ran == ["lookup", "charge"]  # not run again: it may have charged
    [item] = pending(db, "s")
    assert item["kind"] in ("in_doubt", "idempotency_unknown")
    assert item["call_id"] == "c2"
    if answer == "respond":
        evs("respond", "s", "c2", "--result", '{"charged": 12}', db=db)
    else:
        evs("rerun", "s", "c2", "--force", db=db)
    paused = await agent.run(None, session_id="s")
    assert isinstance(paused.output, DeferredToolRequests)
    assert ran == (["lookup", "charge"] if answer == "respond"
                   else ["lookup", "charge", "charge"])
    assert [c.tool_name for c in paused.output.approvals] == ["ship"]
    await agent.aclose()


@pytest.mark.slow
async def test_pydantic_ai_denied_approval_gets_the_denial(tmp_path: Path) -> None:
    db = str(tmp_path / "deny.db")
    ran: list[str] = []
    agent = EventStoreAgent(order_agent(ran=ran), store=db)
    await agent.run("Buy the book", session_id="s")
    [item] = pending(db, "s")
    evs("confirm", "s", item["confirmation_id"], "--no", db=db)
    done = await agent.run(None, session_id="s")
    assert done.output == "done: The tool call was denied."
    assert "ship" not in ran
    ledger = CallLedger.of(await _events(db, "s"))
    assert ledger.get("c3").decision() == "settled"
    await agent.aclose()


@pytest.mark.slow
async def test_pydantic_ai_external_tool_result_from_evs_respond(tmp_path: Path) -> None:
    db = str(tmp_path / "ext.db")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from _pai import returns

        done = returns(messages)
        if "approve_refund" not in done:
            return ModelResponse(parts=[ToolCallPart("approve_refund", {"order": 7}, "x1")])
        return ModelResponse(parts=[TextPart(f"refund: {done['approve_refund']}")])

    external = ExternalToolset([ToolDefinition(
        name="approve_refund",
        parameters_json_schema={"type": "object", "properties": {"order": {"type": "integer"}}},
    )])
    agent = EventStoreAgent(Agent(FunctionModel(model), name="desk", toolsets=[external],
                                  output_type=[str, DeferredToolRequests]), store=db)
    waiting = await agent.run("Refund order 7", session_id="s")
    assert isinstance(waiting.output, DeferredToolRequests)
    assert [c.tool_name for c in waiting.output.calls] == ["approve_refund"]
    assert waiting.output.metadata == {}  # as pydantic-ai hands an external call over
    [item] = pending(db, "s")
    assert item["kind"] == "long_running"
    assert item["call_id"] == "x1"
    again = await agent.run(None, session_id="s")  # nothing arrived yet: still waiting
    assert isinstance(again.output, DeferredToolRequests)
    assert again.output.metadata == {}
    evs("respond", "s", "x1", "--result", '{"ok": true, "amount": 30}', db=db)
    done = await agent.run(None, session_id="s")
    assert done.output == "refund: {'amount': 30, 'ok': True}"
    await agent.aclose()


async def test_pydantic_ai_structured_output_and_output_retry(tmp_path: Path) -> None:
    from pydantic import BaseModel
    from pydantic_ai import ModelRetry

    class Order(BaseModel):
        item: str
        price: int

    agent: Agent[None, Order] = Agent(TestModel(custom_output_args={"item": "book", "price": 0}),
                                      name="typed", output_type=Order)
    tries: list[int] = []

    @agent.output_validator
    def positive(order: Order) -> Order:
        tries.append(order.price)
        if len(tries) == 1:
            raise ModelRetry("price must be positive")
        return order

    wrapped = EventStoreAgent(agent, store=str(tmp_path / "typed.db"))
    result = await wrapped.run("Price of the book?", session_id="t")
    assert result.output == Order(item="book", price=0)
    assert len(tries) == 2
    loaded = messages_of(await _events(str(tmp_path / "typed.db"), "t"))
    assert _dump(loaded) == _dump(result.all_messages())
    await wrapped.aclose()


async def test_pydantic_ai_stream_iter_and_event_handler(tmp_path: Path) -> None:
    db = str(tmp_path / "stream.db")
    agent: Agent[None, str] = Agent(TestModel(), name="streamer")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    seen: list[str] = []

    async def handler(ctx: Any, stream: Any) -> None:
        async for event in stream:
            seen.append(type(event).__name__)

    wrapped = EventStoreAgent(agent, store=db, event_stream_handler=handler)
    async with wrapped.run_stream("add", session_id="st") as streamed:
        text = await streamed.get_output()
    assert "add" in text
    assert "FunctionToolCallEvent" in seen
    async with wrapped.iter("again", session_id="it") as run:
        nodes = [type(node).__name__ async for node in run]
    assert nodes[-1] == "End"
    for session, ran in (("st", streamed), ("it", run)):
        loaded = messages_of(await _events(db, session))
        assert _dump(loaded) == _dump(ran.all_messages())
    await wrapped.aclose()


def test_pydantic_ai_run_sync_continues_the_session(tmp_path: Path) -> None:
    db = str(tmp_path / "sync.db")
    sync = EventStoreAgent(Agent(TestModel(), name="sync"), store=db)
    try:
        first = sync.run_sync("hello", session_id="sy")
        second = sync.run_sync("again", session_id="sy")
        assert first.output == second.output == "success (no tool calls)"
        assert len(second.all_messages()) == 4
    finally:
        sync.store.close_now()
        # pydantic-ai's run_sync leaves the event loop it made current and open (to reuse
        # it); closing it here keeps its sockets from being collected in a later test.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()
        loop.close()
        asyncio.set_event_loop(None)


@pytest.mark.postgres
async def test_pydantic_ai_resume_on_postgres(empty_postgres_url: str) -> None:
    ran: list[str] = []
    async with await open_store(empty_postgres_url, auto_upgrade=True) as store:
        agent = EventStoreAgent(order_agent(ran=ran, crash_in={"lookup"}), store=store,
                                idempotent_tools=["lookup"])
        with pytest.raises(Crash):
            await agent.run("Buy the book", session_id="pg")
        paused = await agent.run(None, session_id="pg")
        assert isinstance(paused.output, DeferredToolRequests)
        assert ran == ["lookup", "lookup", "charge"]
        events = (await store.get_session("pg")).events
        assert _dump(messages_of(events)) == _dump(paused.all_messages())


@pytest.mark.slow
async def test_pydantic_ai_deferrals_raised_by_tool_bodies_answered_by_evs(tmp_path: Path) -> None:
    """pydantic-ai's human-in-the-loop scenario: a body that raises ApprovalRequired until
    approved, another that raises CallDeferred; answered from another process."""
    db = str(tmp_path / "hitl.db")
    ran: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from _pai import returns

        if not returns(messages):
            return ModelResponse(parts=[ToolCallPart("delete_file", {"path": ".env"}, "h1"),
                                        ToolCallPart("create_file", {"path": "t.txt"}, "h2")])
        return ModelResponse(parts=[TextPart(str(sorted(returns(messages).items())))])

    agent: Agent[None, Any] = Agent(FunctionModel(model), name="hitl",
                                    output_type=[str, DeferredToolRequests])

    @agent.tool
    def delete_file(ctx: RunContext[None], path: str) -> bool:
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        ran.append("delete_file")
        return True

    @agent.tool
    def create_file(ctx: RunContext[None], path: str) -> None:
        raise CallDeferred

    wrapped = EventStoreAgent(agent, store=db)
    paused = await wrapped.run("Delete .env and create t.txt", session_id="h")
    assert isinstance(paused.output, DeferredToolRequests)
    items = {i["call_id"]: i for i in pending(db, "h")}
    assert items["h1"]["kind"] == "confirmation"
    evs("confirm", "h", items["h1"]["confirmation_id"], "--yes", db=db)
    evs("respond", "h", "h2", "--result", '{"result": "created"}', db=db)
    done = await wrapped.run(None, session_id="h")
    assert done.output == "[('create_file', 'created'), ('delete_file', True)]"
    assert ran == ["delete_file"]
    await wrapped.aclose()


async def test_pydantic_ai_files_come_back_from_artifacts(tmp_path: Path) -> None:
    from pydantic_ai.messages import BinaryContent

    db = str(tmp_path / "files.db")
    sizes: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sizes.append(sum(len(c.data) for m in messages for p in m.parts
                         for c in (p.content if isinstance(getattr(p, "content", None), list)
                                   else []) if isinstance(c, BinaryContent)))
        return ModelResponse(parts=[TextPart("seen")])

    picture = BinaryContent(b"\x89PNG" + bytes(range(200)), media_type="image/png")
    agent = EventStoreAgent(Agent(FunctionModel(model), name="eyes"), store=db)
    await agent.run(["Look at this", picture], session_id="f")
    again = EventStoreAgent(Agent(FunctionModel(model), name="eyes"), store=db)
    result = await again.run("And now?", session_id="f")
    assert sizes == [204, 204]  # the second run, in a new wrapper, sent the picture again
    loaded = messages_of(await _events(db, "f"), None)
    assert len(loaded) == 4
    assert _dump(result.all_messages())[0]["parts"][0]["content"][1]["data"] != ""
    await agent.aclose()
    await again.aclose()


@pytest.mark.slow
async def test_pydantic_ai_chat_round_trips_through_evs_export(tmp_path: Path) -> None:
    from pydantic_ai.messages import BinaryContent

    db, other = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    ran: list[str] = []
    agent = EventStoreAgent(order_agent(ran=ran), store=db)
    await agent.run(["Buy the book", BinaryContent(b"receipt", media_type="text/plain")],
                    session_id="x")
    await agent.aclose()
    dump = tmp_path / "x.jsonl"
    evs("export", "x", "-o", str(dump), db=db)
    async with await open_store(other, auto_upgrade=True) as store:
        await store.aclose()
    imported = evs("import", str(dump), db=other)
    new_id = imported["session_id"] if isinstance(imported, dict) else "x"
    assert _dump(await _conversation(other, new_id)) == _dump(await _conversation(db, "x"))
    assert len(await _conversation(other, new_id)) == 6
    assert [p["kind"] for p in pending(other, new_id)] == ["confirmation"]


async def test_pydantic_ai_deferred_call_reads_as_long_running_everywhere(tmp_path: Path) -> None:
    """A call whose body raised CallDeferred waits for its result from outside: the shared
    readings (``pending()`` under ``evs pending``, ``call_status`` under ``evs show`` and
    ``evs web``) call it long-running, not in doubt, and no run executes it again — not even
    as an idempotent tool — until its result is given."""
    from eventstore.commands._timeline import analyze
    from runtime.replay import pending as pending_of
    from runtime.replay import submit_response

    db = str(tmp_path / "deferred.db")
    ran: list[str] = []
    wrapped = EventStoreAgent(deferring_agent(ran=ran), store=db, idempotent_tools=["render"])
    for _ in range(2):
        waiting = await wrapped.run("Render page 1" if not ran else None, session_id="d")
        assert isinstance(waiting.output, DeferredToolRequests)
        assert [c.tool_call_id for c in waiting.output.calls] == ["r1"]
        assert IN_DOUBT_KEY not in waiting.output.metadata.get("r1", {})
    assert ran == ["render"]
    events = await _events(db, "d")
    for known in (None, ["render"]):
        report = pending_of(events, idempotent_tools=known)
        assert [(p.kind, p.call.id) for p in report] == [("long_running", "r1")]
        assert report.next_run.step == "waits"
    assert analyze(events).status("r1") == "long_running"
    async with await open_store(db) as store:
        await submit_response(store, session_id="d", call_id="r1", response={"result": "PDF"})
    done = await wrapped.run(None, session_id="d")
    assert done.output == "rendered: PDF"
    assert ran == ["render"]
    report = pending_of(await _events(db, "d"), idempotent_tools=["render"])
    assert list(report) == []
    assert report.next_run.step == "completed"
    await wrapped.aclose()


@pytest.mark.parametrize("call", ["enqueue", "request_compaction", "cancel"])
async def test_pydantic_ai_tool_body_may_not_enqueue_compact_or_cancel(tmp_path: Path,
                                                                       call: str) -> None:
    """A resumed run returns a tool's recorded result without running its body again, so what
    the body enqueued, asked to compact or cancelled would not happen then: each is refused
    with pydantic-ai's own UserError, naming the call; a tool that does none of them runs."""
    from pydantic_ai.exceptions import UserError

    db = str(tmp_path / "guard.db")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from _pai import returns

        if not returns(messages):
            name = info.function_tools[0].name
            return ModelResponse(parts=[ToolCallPart(name, {"text": "hi"}, "n1")])
        return ModelResponse(parts=[TextPart(str(sorted(returns(messages).items())))])

    agent: Agent[None, str] = Agent(FunctionModel(model), name="guarded")
    reached: list[str] = []

    @agent.tool
    def note(ctx: RunContext[None], text: str) -> str:
        reached.append(text)
        if call == "enqueue":
            ctx.enqueue("a note for the model")
        elif call == "request_compaction":
            ctx.request_compaction()
        else:
            ctx.cancel()
        return "noted"

    wrapped = EventStoreAgent(agent, store=db)
    with pytest.raises(UserError, match=rf"`(ctx\.)?{call}(\(\))?` is not supported inside a "
                                        "durable tool call"):
        await wrapped.run("Take a note", session_id="g")
    assert reached == ["hi"]
    await wrapped.aclose()

    # The same agent with a tool that does none of them runs to the end.
    calm: Agent[None, str] = Agent(FunctionModel(model), name="calm")

    @calm.tool
    def note_calmly(ctx: RunContext[None], text: str) -> str:
        return "noted"

    ok = EventStoreAgent(calm, store=db)
    done = await ok.run("Take a note", session_id="p")
    assert done.output == "[('note_calmly', 'noted')]"
    await ok.aclose()
