"""Crash recovery with real OS processes on a SQLite file: SIGKILL mid-step, then resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventstore import Content, Event, FunctionCall, Part, open_store
from runtime import idempotency_key
from runtime.replay import pending

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("_crash_child.py")
ROOT = Path(__file__).resolve().parents[3]


def spawn(db: Path, effects: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(effects), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def lines(effects: Path, prefix: str) -> list[str]:
    return [line for line in effects.read_text().splitlines() if line.startswith(prefix)]


async def _create_session(db: Path) -> None:
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name="pay", user_id="u", session_id="s")


async def _events(db: Path) -> list[Event]:
    async with await open_store(db, auto_upgrade=True) as store:
        return (await store.get_session("s")).events


def test_crash_sigkill_mid_step_then_resume_reruns_only_idempotent(tmp_path: Path) -> None:
    db, effects = tmp_path / "crash.db", tmp_path / "effects.txt"
    asyncio.run(_create_session(db))
    child = spawn(db, effects, "crash")
    deadline = time.monotonic() + 30
    while len(lines(effects, "effect") if effects.exists() else []) < 2:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, "the child never reached the tools"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL

    events = asyncio.run(_events(db))
    assert [e.started_call_ids for e in events if e.started_call_ids] == [
        ("call-rate", "call-charge")
    ]
    assert not any(e.function_responses() for e in events)

    resumed = spawn(db, effects, "resume")
    Path(str(effects) + ".go").touch()
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "paused_by_planner"
    assert "call-charge" in result["reason"]

    rate_key, charge_key = idempotency_key("s", "call-rate"), idempotency_key("s", "call-charge")
    assert sorted(lines(effects, "effect")) == [
        f"effect charge_card {charge_key}",
        f"effect lookup_rate {rate_key}",
    ]
    assert lines(effects, "attempt") == [f"attempt lookup_rate {rate_key}"] * 2
    events = asyncio.run(_events(db))
    report = pending(events, idempotent_tools=("lookup_rate",))
    assert [p.call.id for p in report.in_doubt] == ["call-charge"]
    assert report.unanswered == ()
    answered = [r.id for e in events for r in e.function_responses()]
    assert answered == ["call-rate"]


async def _crashed_after_model_event(db: Path) -> None:
    await _create_session(db)
    calls = (
        FunctionCall(id="call-rate", name="lookup_rate", args={"currency": "EUR"}),
        FunctionCall(id="call-charge", name="charge_card", args={"amount": 300}),
    )
    async with await open_store(db, auto_upgrade=True) as store:
        # a process died right after appending the model's function calls
        await store.append(
            "s",
            [
                Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
                Event(
                    author="payments",
                    content=Content(
                        role="model", parts=tuple(Part(function_call=c) for c in calls)
                    ),
                    turn_complete=True,
                ),
            ],
            expected_version=0,
        )


@pytest.mark.parametrize("round_", range(3))
def test_crash_two_processes_resume_at_once_each_call_runs_once_and_is_answered(
    tmp_path: Path, round_: int
) -> None:
    db, effects = tmp_path / "race.db", tmp_path / "effects.txt"
    asyncio.run(_crashed_after_model_event(db))
    children = [spawn(db, effects, "resume") for _ in range(2)]
    time.sleep(0.5)
    Path(str(effects) + ".go").touch()
    outcomes = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode in (0, 3), err
        outcomes.append(json.loads(out)["status"])
    assert "completed" in outcomes or "paused_by_planner" in outcomes, outcomes

    assert len(lines(effects, "effect charge_card")) == 1
    assert len(lines(effects, "effect lookup_rate")) == 1
    events = asyncio.run(_events(db))
    answered = [r.id for e in events for r in e.function_responses()]
    # Whoever ran a call recorded its answer, and only one answer per call landed (a second,
    # live resumer may re-run the idempotent call; its answer is then left out).
    assert sorted(answered) == ["call-charge", "call-rate"]
    assert not pending(events, idempotent_tools=("lookup_rate",))
