"""Nothing the loop decides is kept outside the log: a new runner on a new store object builds
exactly the request the first runner sent."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson
import pytest
from _loop_support import BACKENDS, HAS_SQLITE, open_backend
from pydantic_core import to_jsonable_python

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    function_tool,
)
from runtime.declarations import to_openai


@function_tool
def get_weather(city: str, tool_context: ToolContext) -> dict[str, object]:
    """Return the weather of a city."""
    tool_context.state["last_city"] = city
    return {"city": city, "condition": "sunny"}


def instruction(readonly: object) -> str:
    state = getattr(readonly, "state", {})
    return f"Last city: {state.get('last_city', 'none')}."


def runner_on(store: EventStore, model: ScriptedModel) -> Runner:
    agent = Agent(name="weather_agent", model=model, instruction=instruction, tools=[get_weather])
    return Runner(agent=agent, store=store, app_name="weather")


def comparable(request: ModelRequest) -> tuple[object, ...]:
    return (
        request.instructions,
        request.contents,
        request.declarations,
        list(request.tools_by_name),
        request.native_tools,
    )


def request_json(request: ModelRequest) -> str:
    """The parts of a request the model sees (and the execution table's names), as JSON."""
    return orjson.dumps(
        to_jsonable_python(
            {
                "instructions": request.instructions,
                "contents": request.contents,
                "declarations": [to_openai(d) for d in request.declarations],
                "tools": list(request.tools_by_name),
                "native_tools": request.native_tools,
            }
        ),
        option=orjson.OPT_SORT_KEYS,
    ).decode()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_new_runner_and_store_build_the_same_requests(backend: str, tmp_path: Path) -> None:
    first_model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="c1", name="get_weather", args={"city": "Oslo"}),
                FunctionCall(id="c2", name="get_weather", args={"city": "Rome"}),
            ),
            "Both sunny.",
        ]
    )
    first_store = await open_backend(backend, tmp_path)
    first = runner_on(first_store, first_model)
    await first.create_session(user_id="u", session_id="s")
    result = await first.run(session_id="s", user_id="u", new_message="Oslo and Rome?")
    versions_before_model_calls = [1, 4]  # after the user message; after the responses
    assert [e.seq for e in result.events] == [1, 2, 3, 4, 5]

    # Same store object for memory (nothing persists elsewhere); a new one on the same file else.
    second_store = first_store if backend == "memory" else await open_backend(backend, tmp_path)
    second = runner_on(second_store, ScriptedModel([]))
    for sent, version in zip(first_model.requests, versions_before_model_calls, strict=True):
        ctx = InvocationContext(
            store=second_store,
            session_id="s",
            app_name="weather",
            user_id="u",
            agent=second.agent,
            version=version,
        )
        assert comparable(await second.build_request(ctx)) == comparable(sent)

    # And the next request after the final answer is the same from either runner.
    ctx_first = await first.new_context(session_id="s", user_id="u")
    ctx_second = await second.new_context(session_id="s", user_id="u")
    assert comparable(await first.build_request(ctx_first)) == comparable(
        await second.build_request(ctx_second)
    )
    if second_store is not first_store:
        await second_store.aclose()
    await first_store.aclose()


CHILD = Path(__file__).with_name("_request_child.py")
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not HAS_SQLITE, reason="the SQLite backend is not there yet")
async def test_a_new_process_with_only_the_database_builds_the_same_requests(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="c1", name="get_weather", args={"city": "Oslo"}),
                FunctionCall(id="c2", name="get_weather", args={"city": "Rome"}),
            ),
            "Both sunny.",
        ]
    )
    store = await open_backend("sqlite", tmp_path)
    async with store:
        runner = runner_on(store, model)
        await runner.create_session(user_id="u", session_id="s")
        await runner.run(session_id="s", user_id="u", new_message="Oslo and Rome?")
        next_request = await runner.build_request(
            await runner.new_context(session_id="s", user_id="u")
        )
    expected = [*(request_json(r) for r in model.requests), request_json(next_request)]

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        str(tmp_path / "loop.db"),
        "1",  # before the first model call: after the user message
        "4",  # before the second: after the responses
        "head",  # the next request, after the final answer
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(CHILD.parent)])},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
    assert child.returncode == 0, stderr.decode()
    built = [orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in orjson.loads(stdout)]
    assert built == expected
    assert "Both sunny." in built[-1]  # the head request really is the one after the answer
