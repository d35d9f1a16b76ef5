"""One decision: what ``pending()`` says the next run does is exactly what the runner does.

Generated logs (calls, claims, crashes, confirmations, answers with and without text,
rejections, submitted results, re-run decisions, other agents) are written to a real store; the
report is computed; then ``Runner.run(new_message=None)`` runs on that log with the same tool
knowledge, and the calls it claimed, whether it asked the model and how it ended are compared.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from _replay_support import AGENT
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_replay_properties import IDEMPOTENT, build, step

from eventstore import open_store
from runtime import Agent, ModelRequest, ModelResponse, Runner, function_tool
from runtime.replay import NextRun, pending


class _CountingModel:
    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text="done")


def _agent(model: _CountingModel) -> Agent:
    @function_tool(idempotent=True)
    def get_weather(n: int) -> dict[str, Any]:
        """Weather."""
        return {"sunny": n}

    @function_tool
    def charge_card(n: int) -> dict[str, Any]:
        """Charge."""
        return {"charged": n}

    @function_tool(is_long_running=True)
    def render(n: int) -> None:
        """Render later."""
        return None

    assert sorted(t.name for t in (get_weather, charge_card, render) if t.idempotent) == sorted(
        IDEMPOTENT
    )
    return Agent(name=AGENT, model=model, tools=[get_weather, charge_card, render])


# Plain step lists rarely end in a crash; this ending does: a turn whose calls are claimed
# (some), answered (some), then a few more steps (answers, results, decisions, messages).
crashed = st.tuples(
    st.lists(step, max_size=12),
    st.lists(st.sampled_from(["get_weather", "charge_card", "render"]), min_size=1, max_size=3),
    st.lists(st.sampled_from(["claim", "claim+respond", "none", "confirm"]), min_size=3,
             max_size=3),
    st.lists(step, max_size=3),
)


def _crashed_steps(drawn: Any) -> list[tuple[Any, ...]]:
    before, tools, fates, after = drawn
    steps: list[tuple[Any, ...]] = [*before, ("model", tools)]
    # ``build`` picks calls by index modulo all calls so far; the newest turn's are the last.
    known = sum(len(s[1]) for s in before if s[0] == "model")
    for offset, fate in zip(range(len(tools)), fates, strict=False):
        position = known + offset
        if fate in ("claim", "claim+respond", "confirm"):
            steps.append(("claim", position))
        if fate == "claim+respond":
            steps.append(("respond", position))
        if fate == "confirm":
            steps.append(("confirm", position))
    return [*steps, *after]


async def _run(
    steps: list[tuple[Any, ...]],
) -> tuple[NextRun, tuple[str, ...], int, str, str | None]:
    history = build(steps)
    report = pending(history.events, idempotent_tools=IDEMPOTENT, agent_name=AGENT)
    model = _CountingModel()
    async with await open_store("memory://") as store:
        runner = Runner(agent=_agent(model), store=store, app_name="app")
        await runner.create_session(user_id="u", session_id="s")
        if history.events:
            await store.append(
                "s",
                [dataclasses.replace(e, seq=None) for e in history.events],
                expected_version=0,
            )
        result = await runner.run(session_id="s", user_id="u")
    claims = [e for e in result.events if e.started_call_ids]
    executed = claims[0].started_call_ids if claims else ()
    if report.next_run.step in ("pauses", "waits") or report.next_run.executes:
        assert report  # the run will pause, wait or execute: the report says something waits
    return report.next_run, executed, model.calls, result.status, result.pause_reason


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(step, max_size=25), crashed.map(_crashed_steps)))
# Logs the generator found where the report and the runner disagreed (2026-12-08): deferrals
# with no claim before them, and after an approval or a rejection of the claimed call.
@example([("model", ["get_weather"]), ("defer", 0)])
@example([("model", ["get_weather"]), ("claim", 0), ("confirm", 0), ("answer", 0, "yes"),
          ("defer", 0)])
@example([("model", ["get_weather"]), ("claim", 0), ("confirm", 0), ("answer", 0, "no"),
          ("defer", 0)])
def test_pending_next_run_is_what_the_runner_does(steps: list[tuple[Any, ...]]) -> None:
    predicted, executed, model_calls, status, reason = asyncio.run(_run(steps))
    assert predicted.step != "unknown"  # the report was given the tool knowledge
    assert executed == predicted.executes
    # An executed call may itself hand control back (a long-running tool's deferred result):
    # the run then stops there, whatever was to follow.
    handed_back = bool(executed) and status == "paused_long_running" and model_calls == 0
    if predicted.step == "pauses":
        assert (status, model_calls) == ("paused_by_planner", 0) or handed_back
        if not executed:
            assert reason == predicted.reason  # the same sentence: the same decision
    elif predicted.step == "completed":
        assert (status, model_calls) == ("completed", 0)
    elif predicted.step == "waits":
        assert status in ("paused_for_confirmation", "paused_long_running")
        assert model_calls == 0
    else:
        assert predicted.step == "calls_model"
        assert model_calls == 1 or handed_back, (status, model_calls)
