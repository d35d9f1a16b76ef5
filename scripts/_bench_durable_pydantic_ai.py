"""Pydantic AI's runners for ``scripts/bench_durable.py --framework pydantic-ai``.

What the coordinator wires into ``bench_durable.FRAMEWORKS["pydantic-ai"]``::

    async def pydantic_ai_runners(folder: Path, *, postgres: str | None
                                  ) -> tuple[dict[str, Runs], Callable[[], Awaitable[None]]]

``Runs`` is ``Callable[[], Awaitable[None]]``: one whole agent run. The runners, by name:
``plain`` (``Agent.run``), ``dbos`` (pydantic-ai's ``DBOSAgent.run``, each run a DBOS workflow,
the three tools ``@DBOS.step()``, a SQLite system database under ``folder``, offline),
``ours-sqlite`` (``EventStoreAgent.run`` on an event-store SQLite file under ``folder``, each
run a new session) and ``ours-postgres`` (the same on ``postgres``, when given). The second
value closes them. The agent: a ``FunctionModel`` calling ``lookup_price``, ``charge_card``,
``ship_order`` one per response, then the answer (a 3-step run). Target (issue 39): our SQLite
overhead per run <= ``TARGET`` x DBOSAgent's.

Standalone (same alternating rounds as bench_durable.py; exit 1 when the target is missed)::

    .venv/bin/python scripts/_bench_durable_pydantic_ai.py [--rounds 7] [--runs 20] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Runs = Callable[[], Awaitable[None]]
TARGET = 0.25
"""Our overhead per run at most this fraction of DBOSAgent's."""
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
ANSWER = "Ordered: 12, r-12, t-book."


def _agent(name: str, step: Callable[[Any], Any] = lambda f: f) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    calls = (("lookup_price", {"item": "book"}), ("charge_card", {"amount": 12}),
             ("ship_order", {"item": "book"}))

    def model(messages: list[Any], info: Any) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done < len(calls):
            tool, args = calls[done]
            return ModelResponse(parts=[ToolCallPart(tool, args, f"c{done}-{uuid.uuid4().hex}")])
        return ModelResponse(parts=[TextPart(ANSWER)])

    @step
    def lookup_price(item: str) -> dict[str, Any]:
        return {"item": item, "price": 12}

    @step
    def charge_card(amount: int) -> dict[str, Any]:
        return {"charged": amount, "receipt": f"r-{amount}"}

    @step
    def ship_order(item: str) -> dict[str, Any]:
        return {"shipped": item, "tracking": f"t-{item}"}

    return Agent(FunctionModel(model), name=name,
                 tools=[lookup_price, charge_card, ship_order])


async def pydantic_ai_runners(folder: Path, *, postgres: str | None
                              ) -> tuple[dict[str, Runs], Callable[[], Awaitable[None]]]:
    """The runners to compare (name → one run) and what closes them (see the module)."""
    from dbos import DBOS

    from eventstore import open_store
    from eventstore.integrations.pydantic_ai import EventStoreAgent

    plain_agent = _agent("plain_agent")
    DBOS(config={"name": "bench-durable-pai",
                 "system_database_url": f"sqlite:///{folder / 'dbos-pai.sqlite'}",
                 "log_level": "WARNING"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DBOSAgent is deprecated for DBOSDurability
        from pydantic_ai.durable_exec.dbos import DBOSAgent

        dbos_agent = DBOSAgent(_agent("dbos_agent", DBOS.step()))
    DBOS.launch()
    stores = {"ours-sqlite": await open_store(str(folder / "evs-pai.db"), auto_upgrade=True)}
    if postgres:
        stores["ours-postgres"] = await open_store(postgres, auto_upgrade=True)

    async def plain() -> None:
        assert (await plain_agent.run("Buy the book.")).output == ANSWER

    async def dbos() -> None:
        assert (await dbos_agent.run("Buy the book.")).output == ANSWER

    def ours(store: Any) -> Runs:
        agent = EventStoreAgent(_agent("ours_agent"), store=store)

        async def one() -> None:
            result = await agent.run("Buy the book.", session_id=f"s-{uuid.uuid4().hex}")
            assert result.output == ANSWER

        return one

    runners: dict[str, Runs] = {"plain": plain, "dbos": dbos}
    runners.update({name: ours(store) for name, store in stores.items()})

    async def close() -> None:
        for store in stores.values():
            await store.aclose()
        DBOS.destroy()

    return runners, close


async def _measure(*, rounds: int, runs: int, postgres: str | None) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="evs-bench-pai-") as root:
        runners, close = await pydantic_ai_runners(Path(root), postgres=postgres)
        try:
            for one in runners.values():
                for _ in range(3):
                    await one()
            names = list(runners)
            per_run: dict[str, list[float]] = {name: [] for name in names}
            for index in range(rounds):
                times: dict[str, list[float]] = {name: [] for name in names}
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
    return per_run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    per_run = asyncio.run(_measure(rounds=options.rounds, runs=options.runs,
                                   postgres=None if options.no_postgres else DEFAULT_POSTGRES))
    plain = per_run["plain"]
    print(f"pydantic-ai: {options.rounds} rounds x {options.runs} runs; ms per run, median")
    print(f"  plain          {statistics.median(plain):8.2f} ms")
    over: dict[str, float] = {}
    for name, times in per_run.items():
        if name != "plain":
            over[name] = statistics.median([t - p for t, p in zip(times, plain, strict=True)])
            print(f"  {name:<14} {statistics.median(times):8.2f} ms; overhead {over[name]:7.2f} ms")
    ratio = over["ours-sqlite"] / over["dbos"] if over["dbos"] > 0 else float("inf")
    print(f"  ours-sqlite overhead / dbos overhead: {ratio:.2f} (target <= {TARGET}): "
          f"{'ok' if ratio <= TARGET else 'MISSED'}")
    if "ours-postgres" in over and over["dbos"] > 0:
        pg = over["ours-postgres"] / over["dbos"]
        print(f"  ours-postgres overhead / dbos overhead: {pg:.2f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
