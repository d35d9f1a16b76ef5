"""A run of ``EventStoreAgent`` cancelled by pydantic-ai's ``CancellationToken`` while a tool is
running (the token ``TemporalAgent`` refuses: ours runs in the caller's process, where the token
works as on the plain agent): the run ends with ``RunCancelled``, and the session continues it
like a crashed one — the cancelled call started without a result, so it is in doubt unless its
tool is idempotent; recorded model responses are not asked for again. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from pydantic_ai import Agent, CancellationToken, DeferredToolRequests  # noqa: E402
from pydantic_ai.exceptions import RunCancelled  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from eventstore.integrations.pydantic_ai import IN_DOUBT_KEY, EventStoreAgent  # noqa: E402


def _agent(runs: list[str], started: asyncio.Event, model_calls: list[int]) -> Agent[None, object]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        model_calls.append(len(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"done: {last.content}")])
        return ModelResponse(parts=[ToolCallPart("slow", {}, tool_call_id="c1")])

    agent: Agent[None, object] = Agent(FunctionModel(answer), name="canceller",
                                       output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    async def slow() -> str:
        runs.append("slow")
        started.set()
        if len(runs) == 1:
            await asyncio.sleep(60)  # cancelled long before
        return "ok"

    return agent


async def _cancelled_then_resumed(store: str, *, idempotent: bool) -> tuple[object, list[str],
                                                                            list[int]]:
    runs: list[str] = []
    model_calls: list[int] = []
    started = asyncio.Event()
    ours = EventStoreAgent(_agent(runs, started, model_calls), store=store,
                           idempotent_tools=["slow"] if idempotent else [])
    token = CancellationToken()
    try:
        task = asyncio.create_task(ours.run("go", session_id="s", cancellation_token=token))
        await asyncio.wait_for(started.wait(), timeout=30)
        token.cancel()
        with pytest.raises(RunCancelled):
            await task
        resumed = await ours.run(None, session_id="s")
    finally:
        await ours.aclose()
    return resumed.output, runs, model_calls


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "cancel.db")
    url: str = request.getfixturevalue("empty_postgres_url")
    return url


async def test_pydantic_ai_cancelled_call_is_in_doubt(store_url: str) -> None:
    output, runs, model_calls = await _cancelled_then_resumed(store_url, idempotent=False)
    assert isinstance(output, DeferredToolRequests)
    assert [c.tool_name for c in output.calls] == ["slow"]
    assert output.metadata["c1"][IN_DOUBT_KEY] is True
    assert runs == ["slow"]  # not run again: it may have done its work before the cancel
    assert model_calls == [1]  # the recorded tool call was not asked for again


async def test_pydantic_ai_cancelled_idempotent_call_runs_again(store_url: str) -> None:
    output, runs, model_calls = await _cancelled_then_resumed(store_url, idempotent=True)
    assert output == "done: ok"
    assert runs == ["slow", "slow"]
    assert model_calls == [1, 3]
