"""What durability costs a framework's run: the same agent through the framework's plain run,
DBOS's durable wrapper and ours, in alternating rounds.

    .venv/bin/python scripts/bench_durable.py [--framework openai-agents|pydantic-ai]  (both
        when omitted)
        [--rounds 7] [--runs 20] [--no-postgres]

OpenAI Agents SDK (``--framework openai-agents``): one agent, a fake model (a tool call per
response for three tools, then the answer) and three function tools, run N times per round
through (a) plain ``Runner.run``, (b) DBOS's ``DBOSRunner.run`` inside a ``@DBOS.workflow()``
with the tools as ``@DBOS.step()`` (as dbos-openai-agents documents; a SQLite system
database, offline), (c) our ``EventStoreRunner.run`` on an ``EventStoreSession`` over a SQLite
file (each run a new session), and (d) the same on PostgreSQL (``EVS_TEST_POSTGRES_URL``'s
server; skipped with ``--no-postgres``), the order rotating every round. The overhead of a
durable runner is its median run minus plain ``Runner.run``'s in the same round (single runs
taking turns, so a loaded machine's spikes hit all alike); printed per runner as median
[min-max] over the rounds. Target: our SQLite overhead <= 0.5x DBOS's
(medians); exit status 1 when missed.

Pydantic AI (``--framework pydantic-ai``): the same three-step agent (a ``FunctionModel``)
through plain ``Agent.run``, pydantic-ai's ``DBOSAgent`` (a SQLite system database) and our
``EventStoreAgent`` (``scripts/_bench_durable_pydantic_ai.py``). Target: our SQLite overhead
<= 0.25x DBOSAgent's. Exit status 1 when any framework's target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGETS = {"openai-agents": 0.5, "pydantic-ai": 0.25}
"""Per framework: our SQLite overhead per run at most this times DBOS's (issues 38, 39)."""
"""Our overhead per run at most this fraction of DBOS's."""

Runs = Callable[[], Awaitable[None]]


# --- OpenAI Agents SDK ---------------------------------------------------------------------


def _openai_agent(tools: list[Any]) -> Any:
    from agents import Agent, Model, ModelResponse, Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    names = [t.name for t in tools]

    class Scripted(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            done = sum(1 for i in input if isinstance(i, dict)
                       and i.get("type") == "function_call_output") if isinstance(
                           input, list) else 0
            if done < len(names):
                output: list[Any] = [ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{done}", name=names[done],
                    arguments='{"item": "book"}', id=f"fc_{done}", status="completed")]
            else:
                output = [ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text="Done.",
                                                annotations=[])])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return Agent(name="shop", model=Scripted(), tools=tools)


def _plain_tools(wrap: Callable[[Any], Any] = lambda f: f) -> list[Any]:
    from agents import function_tool

    async def lookup_price(item: str) -> dict[str, object]:
        """Look up a price."""
        return {"item": item, "price": 12}

    async def reserve(item: str) -> dict[str, object]:
        """Reserve the item."""
        return {"reserved": item}

    async def charge_card(item: str) -> dict[str, object]:
        """Charge the card for the item."""
        return {"charged": 12, "item": item}

    return [function_tool(wrap(f)) for f in (lookup_price, reserve, charge_card)]


async def openai_agents_runners(folder: Path, *, postgres: str | None) -> tuple[
        dict[str, Runs], Callable[[], Awaitable[None]]]:
    """The runners to compare (name → one run) and what closes them."""
    from agents import Runner, set_tracing_disabled
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner

    from eventstore import open_store
    from eventstore.integrations.openai_agents import EventStoreRunner, EventStoreSession

    set_tracing_disabled(True)
    plain_agent = _openai_agent(_plain_tools())
    DBOS(config={"name": "bench-durable",
                 "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
                 "log_level": "WARNING"})
    dbos_agent = _openai_agent(_plain_tools(DBOS.step()))

    @DBOS.workflow()
    async def dbos_run(text: str) -> str:
        result = await DBOSRunner.run(dbos_agent, text)
        return str(result.final_output)

    DBOS.launch()
    ours_agent = _openai_agent(_plain_tools())
    stores = {"ours-sqlite": await open_store(str(folder / "evs.db"), auto_upgrade=True)}
    if postgres:
        stores["ours-postgres"] = await open_store(postgres, auto_upgrade=True)

    async def plain() -> None:
        assert (await Runner.run(plain_agent, "Buy the book.")).final_output == "Done."

    async def dbos() -> None:
        assert await dbos_run("Buy the book.") == "Done."

    def ours(store: Any) -> Runs:
        async def one() -> None:
            session = EventStoreSession(f"s-{uuid.uuid4().hex}", store)
            result = await EventStoreRunner.run(ours_agent, "Buy the book.", session=session)
            assert result.final_output == "Done."

        return one

    runners: dict[str, Runs] = {"plain": plain, "dbos": dbos}
    runners.update({name: ours(store) for name, store in stores.items()})

    async def close() -> None:
        for store in stores.values():
            await store.aclose()
        DBOS.destroy()

    return runners, close


async def pydantic_ai_runners(
    folder: Path, *, postgres: str | None
) -> tuple[dict[str, Runs], Callable[[], Awaitable[None]]]:
    """Pydantic AI's runners (plain, DBOSAgent, ours), from its own module."""
    from _bench_durable_pydantic_ai import pydantic_ai_runners as runners

    built: tuple[dict[str, Runs], Callable[[], Awaitable[None]]] = await runners(
        folder, postgres=postgres)
    return built


FRAMEWORKS: dict[str, Callable[..., Awaitable[tuple[dict[str, Runs],
                                                     Callable[[], Awaitable[None]]]]]] = {
    "openai-agents": openai_agents_runners,
    "pydantic-ai": pydantic_ai_runners,
}


async def measure(framework: str, *, rounds: int, runs: int, postgres: str | None) -> int:
    with tempfile.TemporaryDirectory(prefix="evs-bench-durable-") as root:
        runners, close = await FRAMEWORKS[framework](Path(root), postgres=postgres)
        try:
            for one in runners.values():  # warm up: imports, connections, caches
                for _ in range(3):
                    await one()
            per_run: dict[str, list[float]] = {name: [] for name in runners}
            names = list(runners)
            for index in range(rounds):
                # Single runs in turn (the order rotating), so load spikes of a shared machine
                # hit every runner alike; a round's figure is its median run.
                times: dict[str, list[float]] = {name: [] for name in runners}
                for turn in range(runs):
                    shift = (index + turn) % len(names)
                    for name in names[shift:] + names[:shift]:
                        started = time.perf_counter()
                        await runners[name]()
                        times[name].append((time.perf_counter() - started) * 1000)
                for name in names:
                    per_run[name].append(statistics.median(times[name]))
        finally:
            await close()
    return report(framework, per_run, rounds=rounds, runs=runs)


def report(framework: str, per_run: dict[str, list[float]], *, rounds: int, runs: int) -> int:
    plain = per_run["plain"]
    print(f"{framework}: {rounds} rounds x {runs} runs; ms per run, median [min-max]")
    print(f"  plain                {statistics.median(plain):8.2f} ms "
          f"[{min(plain):.2f}-{max(plain):.2f}]")
    overheads: dict[str, list[float]] = {}
    for name, times in per_run.items():
        if name == "plain":
            continue
        over = [t - p for t, p in zip(times, plain, strict=True)]
        overheads[name] = over
        print(f"  {name:<20} {statistics.median(times):8.2f} ms; overhead "
              f"{statistics.median(over):7.2f} ms [{min(over):.2f}-{max(over):.2f}]")
    dbos = statistics.median(overheads["dbos"])
    ours = statistics.median(overheads["ours-sqlite"])
    ratio = ours / dbos if dbos > 0 else float("inf")
    target = TARGETS[framework]
    ok = ratio <= target
    print(f"  ours-sqlite overhead / dbos overhead: {ratio:.2f} (target <= {target}): "
          f"{'ok' if ok else 'MISSED'}")
    if "ours-postgres" in overheads:
        pg = statistics.median(overheads["ours-postgres"])
        print(f"  ours-postgres overhead / dbos overhead: {pg / dbos if dbos > 0 else 0:.2f}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", action="append", choices=sorted(FRAMEWORKS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    postgres = None if options.no_postgres else os.environ.get(
        "EVS_TEST_POSTGRES_URL", DEFAULT_POSTGRES)
    statuses = [
        asyncio.run(measure(name, rounds=options.rounds, runs=options.runs, postgres=postgres))
        for name in options.framework or sorted(FRAMEWORKS)
    ]
    return max(statuses)


if __name__ == "__main__":
    sys.exit(main())
