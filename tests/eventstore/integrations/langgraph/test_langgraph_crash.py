"""A LangGraph process on ``EventStoreSaver`` killed with SIGKILL mid-run loses no checkpoint
whose put returned and leaves none half-written: each one loads afterwards, every checkpoint
of each thread loads whole, and ``evs verify`` finds nothing wrong. The saver batches a
thread's writes into one transaction at a time, so this is the check that a put is not
acknowledged before its batch is committed."""

from __future__ import annotations

from _extras import require_extra

langgraph = require_extra("langgraph", "langgraph")

import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from _evs_support import BackendTarget  # noqa: E402

from eventstore.integrations.langgraph import EventStoreSaver  # noqa: E402

import pytest  # noqa: E402  # isort: skip

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]

CHILD = r"""
import asyncio, sys
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from eventstore.integrations.langgraph import EventStoreSaver

url, mode, tag = sys.argv[1:4]

class Chat(TypedDict):
    notes: Annotated[list[str], lambda a, b: a + b]
    turns: int

def note(state: Chat) -> dict:
    return {"notes": [f"turn {state['turns']}"], "turns": state["turns"] + 1}

def again(state: Chat) -> str:
    return "note" if state["turns"] % 3 else END

class Acknowledging(EventStoreSaver):
    def _say(self, config):
        c = config["configurable"]
        print("ack", c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"], flush=True)
        return config
    def put(self, *args, **kwargs):
        return self._say(super().put(*args, **kwargs))
    async def aput(self, *args, **kwargs):
        return self._say(await super().aput(*args, **kwargs))

def graph(saver):
    builder = StateGraph(Chat)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    builder.add_conditional_edges("note", again, ["note", END])
    return builder.compile(checkpointer=saver)

def cfg(i):
    return {"configurable": {"thread_id": f"{tag}-{i % 5}"}}

if mode == "sync":
    with Acknowledging(url) as saver:
        g = graph(saver)
        for i in range(1_000_000):
            g.invoke({"notes": [f"in {i}"], "turns": 1}, cfg(i))
else:
    async def main():
        async with Acknowledging(url) as saver:
            g = graph(saver)
            for i in range(1_000_000):
                await asyncio.gather(*(g.ainvoke({"notes": [f"in {i}"], "turns": 1}, cfg(i + j))
                                       for j in range(3)))
    asyncio.run(main())
"""


def _killed_run(url: str, mode: str, tag: str) -> list[tuple[str, str, str]]:
    """Run the child until it has acknowledged some puts, SIGKILL it at a random moment after
    that, and return every put it acknowledged."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, mode, tag], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while len(lines) < 10:
        line = child.stdout.readline()
        if not line:
            _, err = child.communicate()
            pytest.fail(f"the child ended before its tenth put: {err[-2000:]}")
        assert time.monotonic() < deadline, "the child was too slow to put ten checkpoints"
        lines.append(line)
    time.sleep(random.uniform(0.0, 0.5))
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL
    acked = []
    for line in [*lines, *out.splitlines()]:
        parts = line.split(" ")
        if parts[0] == "ack" and len(parts) == 4:  # a line cut by the kill is not an ack
            acked.append((parts[1], parts[2], parts[3].strip()))
    return acked


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_killed_langgraph_run_loses_no_acknowledged_checkpoint(
    sql_target: BackendTarget, mode: str
) -> None:
    url = sql_target.url
    acked: list[tuple[str, str, str]] = []
    for kill in range(2):
        acked += _killed_run(url, mode, f"k{kill}")
    assert len(acked) >= 20

    with EventStoreSaver(url) as saver:
        lost = [a for a in acked if saver.get_tuple({"configurable": {
            "thread_id": a[0], "checkpoint_ns": a[1], "checkpoint_id": a[2]}}) is None]
        assert lost == []
        for thread in {a[0] for a in acked}:
            stored = list(saver.list({"configurable": {"thread_id": thread}}))
            assert stored
            for checkpoint in stored:
                values = checkpoint.checkpoint["channel_values"]
                if checkpoint.metadata["step"] == -1:  # the input, before any node ran
                    assert "__start__" in values, checkpoint
                else:
                    assert isinstance(values.get("notes"), list), checkpoint
                    assert isinstance(values.get("turns"), int), checkpoint
    verify = subprocess.run([sys.executable, "-m", "eventstore.cli", "verify", "--db", url],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
