"""LangGraph's ``DeltaChannel`` on the event-store checkpointer: the saver answers
``get_delta_channel_history`` itself, from one read of the thread, with exactly what LangGraph's
generic walk over ``get_tuple`` finds, and graphs whose messages live in a delta channel give the
values they give on LangGraph's ``InMemorySaver``: across turns, past snapshots, after time travel
and in a subgraph, sync and async, on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from _extras import require_extra

langgraph = require_extra("langgraph", "langgraph")
delta = require_extra("langgraph.channels.delta", "langgraph")

from typing import Annotated, Any, TypedDict  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.graph.message import _messages_delta_reducer  # noqa: E402

from eventstore.integrations.langgraph import EventStoreSaver  # noqa: E402

DeltaChannel = delta.DeltaChannel


class Chat(TypedDict):
    # A snapshot every third step, so the walks end at snapshots as well as at the root.
    messages: Annotated[list[Any], DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]
    turns: int


class Outer(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]


def _chat_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    def respond(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply-{n}", id=f"ai-{n}")],
                "turns": state.get("turns", 0) + 1}

    def check(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"checked-{len(state['messages'])}",
                                       id=f"chk-{len(state['messages'])}")]}

    builder = StateGraph(Chat)
    builder.add_node("respond", respond)
    builder.add_node("check", check)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", "check")
    return builder.compile(checkpointer=saver)


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _said(messages: list[Any]) -> list[tuple[str, str | None, Any]]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


def _history_shape(history: Any) -> dict[str, Any]:
    """A comparable form of a ``get_delta_channel_history`` answer."""
    out: dict[str, Any] = {}
    for channel, entry in history.items():
        seed = entry.get("seed", "<none>")
        if isinstance(seed, list):
            seed = _said(seed)
        elif hasattr(seed, "value"):  # a _DeltaSnapshot
            seed = ("snapshot", _said(seed.value))
        out[channel] = {
            "writes": [(task, ch, _said(v) if isinstance(v, list) else v)
                       for task, ch, v in entry["writes"]],
            "seed": seed,
        }
    return out


def _turns(graph: Any, thread: str) -> list[Any]:
    results = []
    for i in range(5):
        results.append(graph.invoke({"messages": [HumanMessage(content=f"h{i}", id=f"h{i}")]},
                                    _cfg(thread)))
    return results


def test_delta_graph_matches_in_memory_and_each_history_matches_the_generic_walk(
        backend_target: BackendTarget) -> None:
    theirs = _chat_graph(InMemorySaver())
    with EventStoreSaver(backend_target.url) as saver:
        ours = _chat_graph(saver)
        for got, expected in zip(_turns(ours, "t"), _turns(theirs, "t"), strict=True):
            assert _said(got["messages"]) == _said(expected["messages"])
            assert got["turns"] == expected["turns"]
        assert len(got["messages"]) == 15  # 5 turns of a question, a reply and a check

        snapshots = list(ours.get_state_history(_cfg("t")))
        assert len(snapshots) == len(list(theirs.get_state_history(_cfg("t")))) > 10
        for snapshot in snapshots:
            config = snapshot.config
            for channels in (["messages"], ["messages", "turns", "absent"]):
                mine = saver.get_delta_channel_history(config=config, channels=channels)
                generic = BaseCheckpointSaver.get_delta_channel_history(
                    saver, config=config, channels=channels)
                assert _history_shape(mine) == _history_shape(generic), config
        # The newest checkpoint's walk ends at a snapshot: a seed, then the writes after it.
        newest = saver.get_delta_channel_history(config=_cfg("t"), channels=["messages"])
        assert "seed" in newest["messages"]
        assert saver.get_delta_channel_history(config=_cfg("t"), channels=[]) == {}
        missing = saver.get_delta_channel_history(config=_cfg("nobody"), channels=["messages"])
        assert missing == {"messages": {"writes": []}}


async def test_delta_history_async_matches_the_generic_walk_and_hands_out_copies(
        backend_target: BackendTarget) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        graph = _chat_graph(saver)
        for i in range(4):
            await graph.ainvoke({"messages": [HumanMessage(content=f"h{i}", id=f"h{i}")]},
                                _cfg("a"))
        states = [s async for s in graph.aget_state_history(_cfg("a"))]
        edited = 0
        for state in states:
            mine = await saver.aget_delta_channel_history(config=state.config,
                                                          channels=["messages", "turns"])
            generic = await BaseCheckpointSaver.aget_delta_channel_history(
                saver, config=state.config, channels=["messages", "turns"])
            assert _history_shape(mine) == _history_shape(generic)
            seed = mine["messages"].get("seed")
            if seed is not None:  # a snapshot: what the caller does to it stays its own
                seed.value[0].content = "edited by the caller"
                again = await saver.aget_delta_channel_history(config=state.config,
                                                               channels=["messages"])
                assert again["messages"]["seed"].value[0].content != "edited by the caller"
                edited += 1
        assert edited > 3
        final = await graph.aget_state(_cfg("a"))
        assert [m.content for m in final.values["messages"]][:3] == ["h0", "reply-1",
                                                                     "checked-2"]


def test_delta_time_travel_sees_only_its_own_branch(backend_target: BackendTarget) -> None:
    with EventStoreSaver(backend_target.url) as saver:
        graph = _chat_graph(saver)
        _turns(graph, "tt")
        after_two = next(s for s in graph.get_state_history(_cfg("tt"))
                         if len(s.values.get("messages", [])) == 6 and not s.next)
        forked = graph.invoke({"messages": [HumanMessage(content="fork", id="f")]},
                              after_two.config)
        assert [m.content for m in forked["messages"]] == [
            "h0", "reply-1", "checked-2", "h1", "reply-4", "checked-5", "fork", "reply-7",
            "checked-8"]
        # The old branch is intact.
        old = graph.get_state(after_two.config)
        assert len(old.values["messages"]) == 6


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_delta_channel_in_a_subgraph(backend_target: BackendTarget, durability: str) -> None:
    inner = StateGraph(Outer)
    inner.add_node("inner", lambda s: {"messages": [AIMessage(content="inner", id=None)]})
    inner.add_edge(START, "inner")
    with EventStoreSaver(backend_target.url) as saver:
        outer = StateGraph(Outer)
        outer.add_node("sub", inner.compile())
        outer.add_node("after", lambda s: {
            "messages": [AIMessage(content=f"n={len(s['messages'])}")]})
        outer.add_edge(START, "sub")
        outer.add_edge("sub", "after")
        graph = outer.compile(checkpointer=saver)
        for i in range(4):
            out = graph.invoke({"messages": [HumanMessage(content=f"q{i}")]}, _cfg("s"),
                               durability=durability)
        assert [m.content for m in out["messages"]][-3:] == ["q3", "inner", "n=11"]
        assert len(graph.get_state(_cfg("s")).values["messages"]) == 12


async def test_writes_to_a_delta_channel_never_wait_for_the_next_checkpoint(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # LangGraph puts a checkpoint only after the writes to its delta channels committed, so
    # such writes waiting for that checkpoint (outbox.WRITES_WAIT) would wait out the timer at
    # every step. With the wait made very long, they must still return at once; other writes
    # still wait for the checkpoint that follows them.
    import asyncio

    from langgraph.checkpoint.base import empty_checkpoint

    from eventstore.integrations.langgraph import outbox

    monkeypatch.setattr(outbox, "WRITES_WAIT", 60.0)
    async with EventStoreSaver(tmp_path / "delta.db") as saver:
        checkpoint = empty_checkpoint()
        first = await saver.aput(
            _cfg("w"), checkpoint,
            {"source": "loop", "step": 0, "counters_since_delta_snapshot": {"messages": [1, 1]}},
            {})
        await asyncio.wait_for(
            saver.aput_writes(first, [("messages", [HumanMessage(content="x")])], "task-1"),
            timeout=20)
        plain = asyncio.ensure_future(saver.aput_writes(first, [("turns", 1)], "task-2"))
        await asyncio.sleep(0.5)
        assert not plain.done()  # waiting for the checkpoint that normally follows
        later = empty_checkpoint()
        second = await saver.aput(
            first, later,
            {"source": "loop", "step": 1, "counters_since_delta_snapshot": {"messages": [2, 2]}},
            {})
        await asyncio.wait_for(plain, timeout=20)
        stored = await saver.aget_tuple(first)
        assert stored is not None
        assert sorted(w[1] for w in stored.pending_writes or []) == ["messages", "turns"]
    # Another process resuming the thread learns the delta channels from the checkpoint it
    # loads, before it puts any: its first writes do not wait either.
    async with EventStoreSaver(tmp_path / "delta.db") as resumed:
        assert await resumed.aget_tuple(_cfg("w")) is not None
        await asyncio.wait_for(
            resumed.aput_writes(second, [("messages", [HumanMessage(content="y")])], "task-3"),
            timeout=20)
