"""Forking a session with the runtime: a fork made at a confirmation pause and answered the other
way runs on its own through the Runner while the origin stays byte-identical; the store's step
boundaries (``eventstore._fork.StepScan``) are rest points of the runtime's resume planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Event,
    EventStore,
    ForkPointError,
    open_store,
)
from eventstore._fork import StepScan
from eventstore.commands._exchange import parse_export
from runtime.cli._demo_agent import REPORT, demo_idempotent_tools, demo_runner
from runtime.replay import answer_confirmation, plan_resume

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
APP = "weather-demo"


async def _raw(store: EventStore, session_id: str) -> list[Any]:
    return await store.backend.read(session_id, after=None, upto=None, backwards=False,
                                    limit=None)


async def _run(store: EventStore, session_id: str, message: str | None = None) -> str | None:
    events = await store.read(session_id)
    runner = demo_runner(store, events, app_name=APP)
    result = await runner.run(session_id=session_id, user_id="u", new_message=message)
    return result.status


def _confirmation_id(events: list[Event]) -> str:
    return next(c.id for e in reversed(events) for c in e.function_calls()
                if c.name == REQUEST_CONFIRMATION_FUNCTION)


async def test_fork_at_a_pause_answered_the_other_way_runs_independently(
    store: EventStore,
) -> None:
    await _fork_and_answer_the_other_way(store)


@pytest.mark.postgres
async def test_fork_at_a_pause_answered_the_other_way_on_postgres(
    empty_postgres_url: str,
) -> None:
    async with await open_store(empty_postgres_url, auto_upgrade=True) as store:
        await _fork_and_answer_the_other_way(store)


async def _fork_and_answer_the_other_way(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="o")
    status = await _run(store, "o", "Weather in Paris and Atlantis, and the paid forecast.")
    assert status == "paused_for_confirmation"
    paused = await store.read("o")
    fork = await store.fork("o", at=len(paused), new_session_id="f")
    assert fork.events == paused
    cid = _confirmation_id(paused)

    await answer_confirmation(store, session_id="o", confirmation_id=cid, confirmed=True)
    assert await _run(store, "o") == "paused_long_running"
    origin_rows = await _raw(store, "o")
    origin_artifacts = await store.list_artifacts("o")
    origin_state = await store.state("o")
    assert origin_state["forecast_cost_usd"] == 0.05
    assert REPORT in origin_artifacts

    await answer_confirmation(store, session_id="f", confirmation_id=cid, confirmed=False)
    assert await _run(store, "f") == "paused_long_running"
    forked = await store.read("f")
    assert forked[:len(paused)] == paused
    [response] = [r for e in forked[len(paused):] for r in e.function_responses()
                  if r.name == "paid_forecast"]
    assert response.response["error"]["kind"] == "confirmation_rejected"
    fork_state = await store.state("f")
    assert "forecast_cost_usd" not in fork_state
    assert REPORT not in await store.list_artifacts("f")
    # The fork's run changed nothing of the origin.
    assert await _raw(store, "o") == origin_rows
    assert await store.list_artifacts("o") == origin_artifacts
    assert await store.state("o") == origin_state


async def test_fork_between_the_paid_call_and_its_request_is_refused(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="o")
    await _run(store, "o", "Weather in Paris and Atlantis, and the paid forecast.")
    events = await store.read("o")
    pause = len(events)
    # The paid call's model turn is refused: its confirmation is not requested yet.
    turn = next(e.seq for e in events for c in e.function_calls() if c.name == "paid_forecast")
    assert turn is not None
    with pytest.raises(ForkPointError) as raised:
        await store.fork("o", at=turn)
    assert raised.value.after == pause
    assert f"{pause} (after)" in str(raised.value)


def _recorded_logs() -> list[tuple[str, list[Event]]]:
    found = []
    for path in sorted(RECORDINGS.glob("*.jsonl")):
        export = parse_export(path.read_bytes().splitlines())
        found.append((path.name, [e for e in export.events]))
    return found


@pytest.mark.parametrize(("name", "events"), [pytest.param(n, e, id=n) for n, e in
                                              _recorded_logs()])
def test_step_boundaries_are_rest_points_of_the_resume_planner(
    name: str, events: list[Event]
) -> None:
    agents = {e.author for e in events if e.author != "user"}
    scan = StepScan()
    rest_points = 0
    for k, event in enumerate(events, start=1):
        scan.feed(event)
        if not scan.at_rest():
            continue
        rest_points += 1
        for agent in agents:
            decision = plan_resume(reversed(events[:k]), agent_name=agent,
                                   idempotent_tools=demo_idempotent_tools())
            assert decision.execute == (), (name, k, agent)
            assert decision.in_doubt == (), (name, k, agent)
    assert 0 < rest_points <= len(events)
