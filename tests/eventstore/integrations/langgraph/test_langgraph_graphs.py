"""Real LangGraph ``StateGraph``s on the event-store checkpointer, sync and async, on memory,
SQLite and PostgreSQL: interrupts resumed with ``Command``, state history, time travel and
forks whose branches never see each other's writes, subgraphs, the three durability modes, and
the pending writes that spare a finished node after a failure."""

from __future__ import annotations

from _extras import require_extra

langgraph = require_extra("langgraph", "langgraph")

import operator  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Any, TypedDict  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from eventstore import open_store  # noqa: E402
from eventstore.integrations.langgraph import METADATA_KEY, EventStoreSaver  # noqa: E402


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _approval_graph(saver: EventStoreSaver) -> Any:
    def ask(state: Log) -> dict[str, list[str]]:
        answer = interrupt("approve?")
        return {"log": [f"answer:{answer}"]}

    builder = StateGraph(Log)
    builder.add_node("start", lambda s: {"log": ["start"]})
    builder.add_node("ask", ask)
    builder.add_node("finish", lambda s: {"log": ["finish"]})
    builder.add_edge(START, "start")
    builder.add_edge("start", "ask")
    builder.add_edge("ask", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=saver)


def test_interrupt_and_resume_sync(backend_target: BackendTarget) -> None:
    with EventStoreSaver(backend_target.url) as saver:
        graph = _approval_graph(saver)
        first = graph.invoke({"log": []}, _cfg("t"))
        assert first["log"] == ["start"]
        assert [i.value for i in first["__interrupt__"]] == ["approve?"]
        state = graph.get_state(_cfg("t"))
        assert state.next == ("ask",)
        assert [i.value for i in state.interrupts] == ["approve?"]
        done = graph.invoke(Command(resume="yes"), _cfg("t"))
        assert done["log"] == ["start", "answer:yes", "finish"]
        assert graph.get_state(_cfg("t")).next == ()


async def test_interrupt_and_resume_async_from_a_fresh_saver(backend_target: BackendTarget
                                                             ) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        graph = _approval_graph(saver)
        await graph.ainvoke({"log": []}, _cfg("t"))
        if not backend_target.persistent:
            done = await graph.ainvoke(Command(resume="ok"), _cfg("t"))
            assert done["log"] == ["start", "answer:ok", "finish"]
            return
    async with EventStoreSaver(backend_target.url) as later:  # another process, later on
        graph = _approval_graph(later)
        state = await graph.aget_state(_cfg("t"))
        assert [i.value for i in state.interrupts] == ["approve?"]
        done = await graph.ainvoke(Command(resume="ok"), _cfg("t"))
        assert done["log"] == ["start", "answer:ok", "finish"]


def _counter_graph(saver: EventStoreSaver) -> Any:
    builder = StateGraph(Log)
    for name in ("a", "b", "c"):
        builder.add_node(name, lambda s, name=name: {"log": [name]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def test_state_history_newest_first_with_each_state(backend_target: BackendTarget) -> None:
    with EventStoreSaver(backend_target.url) as saver:
        graph = _counter_graph(saver)
        graph.invoke({"log": ["in"]}, _cfg("t"))
        history = list(graph.get_state_history(_cfg("t")))
        assert [h.values.get("log") for h in history] == [
            ["in", "a", "b", "c"], ["in", "a", "b"], ["in", "a"], ["in"], []
        ]
        assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
        assert [h.next for h in history] == [(), ("c",), ("b",), ("a",), ("__start__",)]
        assert len(list(graph.get_state_history(_cfg("t"), limit=2))) == 2


async def test_time_travel_forks_see_only_their_own_branch(backend_target: BackendTarget
                                                           ) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        graph = _counter_graph(saver)
        await graph.ainvoke({"log": ["in"]}, _cfg("t"))
        history = [h async for h in graph.aget_state_history(_cfg("t"))]
        before_b = next(h for h in history if h.next == ("b",))
        left = await graph.aupdate_state(before_b.config, {"log": ["left"]})
        right = await graph.aupdate_state(before_b.config, {"log": ["right"]})
        left_done = await graph.ainvoke(None, left)
        right_done = await graph.ainvoke(None, right)
        assert left_done["log"] == ["in", "a", "left", "b", "c"]
        assert right_done["log"] == ["in", "a", "right", "b", "c"]
        head = await graph.aget_state(_cfg("t"))
        assert head.values["log"] == right_done["log"]
        replayed = await graph.ainvoke(None, before_b.config)  # replay from the fork point
        assert replayed["log"] == ["in", "a", "b", "c"]


class Fan(TypedDict):
    log: Annotated[list[str], operator.add]
    mode: str


def test_a_failed_step_keeps_finished_writes_for_its_branch_only(
    backend_target: BackendTarget,
) -> None:
    """Two parallel nodes, one failing: the finished one's write is pending on that
    checkpoint and spares it on retry; a branch forked from that checkpoint reruns it and never
    sees that write."""
    runs: dict[str, int] = {"fine": 0, "flaky": 0}
    failing = {"on": True}

    def fine(state: Fan) -> dict[str, list[str]]:
        runs["fine"] += 1
        return {"log": [f"fine:{state['mode']}"]}

    def flaky(state: Fan) -> dict[str, list[str]]:
        runs["flaky"] += 1
        if failing["on"]:
            raise RuntimeError("flaky failed")
        return {"log": [f"flaky:{state['mode']}"]}

    builder = StateGraph(Fan)
    builder.add_node("split", lambda s: {"log": ["split"]})
    builder.add_node("fine", fine)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "split")
    builder.add_edge("split", "fine")
    builder.add_edge("split", "flaky")
    builder.add_edge(["fine", "flaky"], END)
    with EventStoreSaver(backend_target.url) as saver:
        graph = builder.compile(checkpointer=saver, interrupt_after=["split"])
        for thread in ("retry", "fork"):
            graph.invoke({"log": [], "mode": "one"}, _cfg(thread))
            failing["on"] = True
            with pytest.raises(RuntimeError, match="flaky failed"):
                graph.invoke(None, _cfg(thread))
        assert runs == {"fine": 2, "flaky": 2}
        failing["on"] = False

        retried = graph.invoke(None, _cfg("retry"))
        assert sorted(retried["log"]) == ["fine:one", "flaky:one", "split"]
        assert runs == {"fine": 2, "flaky": 3}  # "fine" spared by its pending write

        failed_at = graph.get_state(_cfg("fork"))
        branch = graph.update_state(failed_at.config, {"mode": "two"})
        forked = graph.invoke(None, branch)
        assert sorted(forked["log"]) == ["fine:two", "flaky:two", "split"]
        assert runs == {"fine": 3, "flaky": 4}  # the branch reran "fine": no write of "one"
        pending = saver.get_tuple(failed_at.config).pending_writes or []
        assert ("log", ["fine:one"]) in [(c, v) for _, c, v in pending]


class Inner(TypedDict):
    log: Annotated[list[str], operator.add]


async def test_subgraph_checkpoints_and_an_interrupt_inside(backend_target: BackendTarget
                                                            ) -> None:
    def inner_ask(state: Inner) -> dict[str, list[str]]:
        return {"log": [f"inner:{interrupt('inner?')}"]}

    inner = StateGraph(Inner)
    inner.add_node("inner_ask", inner_ask)
    inner.add_edge(START, "inner_ask")
    inner.add_edge("inner_ask", END)
    outer = StateGraph(Log)
    outer.add_node("before", lambda s: {"log": ["before"]})
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "before")
    outer.add_edge("before", "sub")
    outer.add_edge("sub", END)
    async with EventStoreSaver(backend_target.url) as saver:
        graph = outer.compile(checkpointer=saver)
        await graph.ainvoke({"log": []}, _cfg("t"))
        state = await graph.aget_state(_cfg("t"), subgraphs=True)
        assert state.next == ("sub",)
        sub_state = state.tasks[0].state
        assert sub_state is not None
        assert sub_state.values == {"log": ["before"]}
        assert sub_state.next == ("inner_ask",)
        namespaces = {t.config["configurable"]["checkpoint_ns"]
                      async for t in saver.alist(_cfg("t"))}
        assert "" in namespaces
        assert any(ns.startswith("sub:") for ns in namespaces)
        done = await graph.ainvoke(Command(resume="yes"), _cfg("t"))
        # The subgraph returns its whole state, which the parent's reducer adds to its own.
        assert done["log"] == ["before", "before", "inner:yes"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_durability_modes(backend_target: BackendTarget, durability: str) -> None:
    async with EventStoreSaver(backend_target.url) as saver:
        graph = _counter_graph(saver)
        out = await graph.ainvoke({"log": ["in"]}, _cfg("t"), durability=durability)
        assert out["log"] == ["in", "a", "b", "c"]
        state = await graph.aget_state(_cfg("t"))
        assert state.values == out
        history = [h async for h in graph.aget_state_history(_cfg("t"))]
        assert len(history) == (1 if durability == "exit" else 5)  # exit: the final one only


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def test_a_long_chat_thread_stores_each_message_once(tmp_path: Path) -> None:
    """A messages graph of 60 turns: each turn's checkpoints store the appended messages, so
    the log's bytes grow linearly with the turns."""
    builder = StateGraph(Chat)
    builder.add_node("reply", lambda s: {"messages": [f"reply to {s['messages'][-1]}"]})
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    path = str(tmp_path / "chat.db")
    with EventStoreSaver(path) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(60):
            graph.invoke({"messages": [f"question {turn} " + "q" * 100]}, _cfg("chat"))
        assert len(graph.get_state(_cfg("chat")).values["messages"]) == 120

    async def sizes() -> list[int]:
        async with await open_store(path) as store:
            events = await store.read_mappings("chat", compact=True)
        return [len(str(e["m"][METADATA_KEY])) for e in events]

    import asyncio
    per_event = asyncio.run(sizes())
    first, last = sum(per_event[:30]), sum(per_event[-30:])
    assert last < first * 1.2, (first, last)  # a whole copy each step: ~60x


_CHILD = """
import sys, operator
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END
from eventstore.integrations.langgraph import EventStoreSaver

class S(TypedDict):
    log: Annotated[list[str], operator.add]

path, worker = sys.argv[1], sys.argv[2]
builder = StateGraph(S)
for name in ("a", "b"):
    builder.add_node(name, lambda s, name=name: {"log": [name]})
builder.add_edge(START, "a"); builder.add_edge("a", "b"); builder.add_edge("b", END)

async def main():
    import asyncio
    async with EventStoreSaver(path) as saver:
        graph = builder.compile(checkpointer=saver)
        await asyncio.gather(*(graph.ainvoke({"log": [worker]},
                                             {"configurable": {"thread_id": f"{worker}-{i}"}})
                               for i in range(12)))
        shared = {"configurable": {"thread_id": "shared"}}
        for _ in range(3):
            await graph.ainvoke({"log": [worker]}, shared)

import asyncio
asyncio.run(main())
"""


@pytest.mark.slow
def test_many_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    """Three processes, each running twelve threads at once and three runs of one shared
    thread, on one SQLite file: no "database is locked", every checkpoint stored."""
    path = str(tmp_path / "shared.db")
    with EventStoreSaver(path) as saver:  # create the schema once
        saver.get_tuple(_cfg("none"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, path, f"w{n}"], env=env,
                              stderr=subprocess.PIPE, text=True) for n in range(3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert not any("locked" in e for e in errors), errors
    with EventStoreSaver(path) as saver:
        graph = _counter_graph(saver)
        for n in range(3):
            for i in range(12):
                state = graph.get_state(_cfg(f"w{n}-{i}"))
                assert state.values["log"] == [f"w{n}", "a", "b"]
        # Runs on one thread from several processes at once race as with any checkpointer:
        # two may start from the same head (the newer checkpoint wins), and a run may start
        # from another process's run mid-way (its input and "a" stored, "b" not yet). The
        # store loses none of their checkpoints, and the newest is a whole run's end.
        per_run = len(list(saver.list(_cfg("w0-0"))))
        assert len(list(saver.list(_cfg("shared")))) == 9 * per_run
        shared = graph.get_state(_cfg("shared")).values["log"]
        assert shared[-2:] == ["a", "b"], shared
        assert shared[-3] in {"w0", "w1", "w2"}, shared
        assert set(shared) <= {"w0", "w1", "w2", "a", "b"}, shared


async def test_a_store_fork_of_a_thread_resumes_on_its_own(tmp_path: Path) -> None:
    """``evs fork`` (``EventStore.fork``) of a thread waiting on an interrupt: the fork is a
    thread of its own, resumed with another answer; the origin is untouched."""
    path = str(tmp_path / "s.db")
    async with EventStoreSaver(path) as saver:
        graph = _approval_graph(saver)
        await graph.ainvoke({"log": []}, _cfg("origin"))
    async with await open_store(path) as store:
        head = await store.version("origin")
        await store.fork("origin", at=head, new_session_id="copy")
    async with EventStoreSaver(path) as saver:
        graph = _approval_graph(saver)
        forked = await graph.ainvoke(Command(resume="no"), _cfg("copy"))
        assert forked["log"] == ["start", "answer:no", "finish"]
        origin = await graph.aget_state(_cfg("origin"))
        assert [i.value for i in origin.interrupts] == ["approve?"]
        done = await graph.ainvoke(Command(resume="yes"), _cfg("origin"))
        assert done["log"] == ["start", "answer:yes", "finish"]
