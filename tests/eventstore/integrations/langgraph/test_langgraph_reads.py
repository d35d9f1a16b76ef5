"""What the LangGraph saver's reads hand out belongs to the caller: editing a message read with
``get_state``/``get_tuple``/``list`` (or returned by ``invoke``) changes no later read of the
saver, which keeps returning what a fresh saver on the same database returns; an edited
message put back with ``update_state`` is stored, and messages read and put back are still
stored once (as appends). The saver's event ids do not draw from a ``uuid.uuid4`` patched after
import (LangGraph's own tests patch it to number their ids)."""

from __future__ import annotations

from _extras import require_extra

require_extra("langgraph", "langgraph")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Any, TypedDict  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

from eventstore import open_store  # noqa: E402
from eventstore.integrations.langgraph import METADATA_KEY, EventStoreSaver  # noqa: E402


class Agent(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


CFG: Any = {"configurable": {"thread_id": "t"}}


def _agent_graph(saver: EventStoreSaver) -> Any:
    def agent(state: Agent) -> dict[str, Any]:
        return {"messages": [AIMessage(id=f"ai{len(state['messages'])}", content="", tool_calls=[
            {"id": "call1", "name": "search", "args": {"query": "query"}}])]}

    builder = StateGraph(Agent)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def _edit(message: Any) -> None:
    message.content = "edited"
    message.tool_calls[0]["args"]["query"] = "a different query"


def _dump(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


def test_editing_what_a_read_returned_changes_no_later_read(
    backend_target: BackendTarget,
) -> None:
    with EventStoreSaver(backend_target.url) as saver:
        graph = _agent_graph(saver)
        result = graph.invoke({"messages": [HumanMessage(id="h0", content="hi")]}, CFG)
        stored = _dump(graph.get_state(CFG).values["messages"])
        assert stored[1]["tool_calls"][0]["args"] == {"query": "query"}
        _edit(result["messages"][-1])  # what invoke returned
        _edit(graph.get_state(CFG).values["messages"][-1])
        got = saver.get_tuple(CFG)
        assert got is not None
        _edit(got.checkpoint["channel_values"]["messages"][-1])
        got.checkpoint["channel_values"]["messages"].append(HumanMessage(content="extra"))
        for history in saver.list(CFG):
            for message in history.checkpoint["channel_values"].get("messages", []):
                if isinstance(message, AIMessage):
                    _edit(message)
        assert _dump(graph.get_state(CFG).values["messages"]) == stored
        newest = next(iter(graph.get_state_history(CFG)))
        assert _dump(newest.values["messages"]) == stored
    if backend_target.persistent:
        with EventStoreSaver(backend_target.url) as fresh:
            assert _dump(_agent_graph(fresh).get_state(CFG).values["messages"]) == stored


def test_an_edited_message_put_back_is_stored(backend_target: BackendTarget) -> None:
    """LangGraph's own ``test_state_graph_packets``: edit the message ``get_state`` returned,
    put it back with ``update_state`` (it replaces the message of its id)."""
    with EventStoreSaver(backend_target.url) as saver:
        graph = _agent_graph(saver)
        graph.invoke({"messages": [HumanMessage(id="h0", content="hi")]}, CFG)
        before = _dump(graph.get_state(CFG).values["messages"])
        last = graph.get_state(CFG).values["messages"][-1]
        _edit(last)
        graph.update_state(CFG, {"messages": last})
        after = _dump(graph.get_state(CFG).values["messages"])
        assert len(after) == 2
        assert after[1]["content"] == "edited"
        assert after[1]["tool_calls"][0]["args"] == {"query": "a different query"}
        history = [_dump(s.values["messages"]) for s in graph.get_state_history(CFG)
                   if s.values.get("messages")]
        assert history[:2] == [after, before]  # the earlier checkpoint keeps the original
    if backend_target.persistent:
        with EventStoreSaver(backend_target.url) as fresh:
            assert _dump(_agent_graph(fresh).get_state(CFG).values["messages"]) == after


async def test_editing_what_an_async_read_returned_changes_no_later_read(
    backend_target: BackendTarget,
) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        graph = _agent_graph(saver)
        await graph.ainvoke({"messages": [HumanMessage(id="h0", content="hi")]}, CFG)
        stored = _dump((await graph.aget_state(CFG)).values["messages"])
        got = await saver.aget_tuple(CFG)
        assert got is not None
        _edit(got.checkpoint["channel_values"]["messages"][-1])
        assert _dump((await graph.aget_state(CFG)).values["messages"]) == stored


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def test_messages_read_between_turns_are_still_stored_once(tmp_path: Path) -> None:
    """Reads hand out copies; a turn that goes on from them still stores only its new messages
    (the delta against what was read), not the whole list again."""
    builder = StateGraph(Chat)
    builder.add_node("reply", lambda s: {"messages": [
        AIMessage(content=f"reply to {s['messages'][-1].content}")]})
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    path = str(tmp_path / "chat.db")
    with EventStoreSaver(path) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(40):
            graph.invoke({"messages": [HumanMessage(content=f"question {turn} " + "q" * 100)]},
                         {"configurable": {"thread_id": "chat"}})
            graph.get_state({"configurable": {"thread_id": "chat"}})  # a reader meanwhile
        assert len(graph.get_state({"configurable": {"thread_id": "chat"}}).values[
            "messages"]) == 80

    async def sizes() -> list[int]:
        async with await open_store(path) as store:
            events = await store.read_mappings("chat", compact=True)
        return [len(str(e["m"][METADATA_KEY])) for e in events]

    import asyncio
    per_event = asyncio.run(sizes())
    first, last = sum(per_event[:20]), sum(per_event[-20:])
    assert last < first * 1.2, (first, last)  # a whole copy each step: ~40x


def test_event_ids_do_not_draw_from_a_uuid4_patched_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawn: list[int] = []
    real = uuid.uuid4

    def counting() -> uuid.UUID:
        drawn.append(1)
        return real()

    with EventStoreSaver() as saver:
        saver.setup()
        monkeypatch.setattr(uuid, "uuid4", counting)
        checkpoint = empty_checkpoint()
        config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                           checkpoint, {"source": "input", "step": -1}, {})
        saver.put_writes(config, [("messages", "hi")], "task-1")
        assert saver.get_tuple(config) is not None
    assert drawn == []


def test_fresh_copies_share_nothing_mutable() -> None:
    from pydantic import BaseModel, ConfigDict

    from eventstore.integrations.langgraph.log import fresh, handed

    class Note(BaseModel):
        model_config = ConfigDict(extra="allow")
        tags: list[str]

    note = Note(tags=["a"], meta={"k": [1]})
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    value = {"notes": [note, (note, "s")], "deep": cyclic}
    copied = fresh(value, 0)
    assert copied == {"notes": [note, (note, "s")], "deep": copied["deep"]}
    copied["notes"][0].tags.append("b")
    copied["notes"][0].meta["k"].append(2)
    copied["notes"][1][0].tags.clear()
    assert note.tags == ["a"]
    assert note.meta == {"k": [1]}
    assert copied["deep"] is not cyclic
    assert copied["deep"][-1] is not cyclic
    own = ("text", 3, note)
    out = handed(own)
    assert out[:2] == ["text", 3]
    assert out[2] == note
    assert out[2] is not note
