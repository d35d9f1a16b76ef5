"""A tool result the log cannot carry becomes an ``execution_failed`` response; the run goes on."""

from __future__ import annotations

import math
from typing import Any

import pydantic
import pytest

from eventstore import EventStore, FunctionCall
from runtime import Agent, ModelResponse, Runner, ScriptedModel, ToolContext, function_tool
from runtime.replay import pending


@pytest.mark.parametrize(
    ("result", "words"),
    [
        pytest.param(2**64, "is the integer 18446744073709551616", id="bigint"),
        pytest.param(math.nan, "is nan", id="nan"),
        pytest.param([[[[1]]]] * 1, None, id="storable"),
    ],
)
async def test_values_unstorable_tool_result_is_an_execution_failed_response(
    store: EventStore, result: Any, words: str | None
) -> None:
    ran: list[int] = []

    @function_tool
    def measure() -> Any:
        """Measure something huge."""
        ran.append(1)
        return result

    model = ScriptedModel(
        [ModelResponse(function_calls=(FunctionCall(id="c1", name="measure", args={}),)), "ok"]
    )
    runner = Runner(agent=Agent(name="agent", model=model, tools=[measure]), store=store,
                    app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    outcome = await runner.run(session_id="s", user_id="u", new_message="measure")
    assert outcome.status == "completed"
    assert ran == [1]
    events = (await store.get_session("s")).events
    [response] = [r for e in events for r in e.function_responses()]
    if words is None:
        assert response.response == {"result": result}
    else:
        assert response.response["error"]["kind"] == "execution_failed"
        assert words in response.response["error"]["message"]
    assert not pending(events, idempotent_tools=())


async def test_values_unstorable_state_value_is_an_execution_failed_response(
    store: EventStore,
) -> None:
    @function_tool
    def remember(tool_context: ToolContext) -> dict[str, Any]:
        """Remember something the log cannot hold."""
        tool_context.state["ok"] = 1
        tool_context.state["huge"] = 2**70
        return {"done": True}

    model = ScriptedModel(
        [ModelResponse(function_calls=(FunctionCall(id="c1", name="remember", args={}),)), "ok"]
    )
    runner = Runner(agent=Agent(name="agent", model=model, tools=[remember]), store=store,
                    app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    outcome = await runner.run(session_id="s", user_id="u", new_message="go")
    assert outcome.status == "completed"
    events = (await store.get_session("s")).events
    [response] = [r.response for e in events for r in e.function_responses()]
    assert response["error"]["kind"] == "execution_failed"
    assert "state['huge']" in response["error"]["message"]
    assert "ok" not in await store.state("s")


class _Reading(pydantic.BaseModel):
    label: str
    extra: dict[str, Any]


def _typed_dict() -> dict[str, Any]:
    return {"a": [1.5, math.inf]}


def _model() -> _Reading:
    return _Reading(label="x", extra={"ratio": -math.inf})


def _untyped():  # type: ignore[no-untyped-def]
    return {"readings": [_Reading(label="y", extra={"v": math.nan})]}


@pytest.mark.parametrize(
    ("func", "path", "words"),
    [
        pytest.param(_typed_dict, "result['a'][1]", "is inf", id="dict-annotation"),
        pytest.param(_model, "result['extra']['ratio']", "is -inf", id="model-any-field"),
        pytest.param(_untyped, "result['readings'][0]['extra']['v']", "is nan", id="no-annotation"),
    ],
)
async def test_values_non_finite_float_in_a_result_is_execution_failed_naming_the_path(
    store: EventStore, func: Any, path: str, words: str
) -> None:
    # pydantic's JSON mode writes NaN/inf as null: stored so, the result would silently change.
    measure = function_tool(name="measure")(func)
    model = ScriptedModel(
        [ModelResponse(function_calls=(FunctionCall(id="c1", name="measure", args={}),)), "ok"]
    )
    runner = Runner(agent=Agent(name="agent", model=model, tools=[measure]), store=store,
                    app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    outcome = await runner.run(session_id="s", user_id="u", new_message="measure")
    assert outcome.status == "completed"
    [response] = [r.response for e in await store.read("s") for r in e.function_responses()]
    assert response["error"]["kind"] == "execution_failed"
    assert f"{path} {words}, which JSON cannot represent" in response["error"]["message"]


async def test_values_null_in_a_result_stays_null(store: EventStore) -> None:
    @function_tool
    def lookup() -> dict[str, Any]:
        """Look something up that is missing."""
        reading = _Reading(label="z", extra={"n": None})
        return {"found": None, "items": [None, 1.5], "model": reading}

    model = ScriptedModel(
        [ModelResponse(function_calls=(FunctionCall(id="c1", name="lookup", args={}),)), "ok"]
    )
    runner = Runner(agent=Agent(name="agent", model=model, tools=[lookup]), store=store,
                    app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="go")
    [response] = [r.response for e in await store.read("s") for r in e.function_responses()]
    assert response == {"found": None, "items": [None, 1.5],
                        "model": {"label": "z", "extra": {"n": None}}}
