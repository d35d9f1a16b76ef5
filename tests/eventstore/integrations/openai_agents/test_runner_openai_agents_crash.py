"""``EventStoreRunner`` killed by SIGKILL at chosen writes (the crash harness's own scenario,
``scripts/_crash_openai_agents.py``), resumed in new processes, answered between them with the
real ``evs pending`` / ``evs confirm`` / ``evs respond`` / ``evs rerun`` in other processes:
each run ends as the uninterrupted one, no tool but the idempotent one runs twice, no recorded
model response is asked for again. The whole sweep is ``scripts/crash_anywhere.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _extras import require_extra

require_extra("agents", "openai-agents")

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "scripts"))

from _crash_common import Scenario, extra_runs_that_count, run_scenario  # noqa: E402

pytestmark = pytest.mark.slow

SCENARIO = Scenario(framework="openai-agents", module=ROOT / "scripts" / "_crash_openai_agents.py",
                    idempotent_tools=frozenset({"lookup_price"}))
AS_TOOL = Scenario(framework="openai-agents-as-tool",
                   module=ROOT / "scripts" / "_crash_openai_agents_as_tool.py",
                   idempotent_tools=frozenset({"lookup_price"}))
FINAL = "Ordered the book for 12; receipt r-12, tracking t-book."


# The scenario's writes: 1 the session, 2 the run's start, 3 model response 0, 4-5 the claim and
# output of lookup_price, 6 response 1, 7-8 charge_card's, 9 response 2, 10 the stop for
# ship_order's approval; then (after `evs confirm`) its claim and output, response 3, the end.
@pytest.mark.parametrize(("point", "decision"), [
    pytest.param(None, None, id="uninterrupted"),
    pytest.param("before:5", None, id="lookup-ran-output-lost-idempotent-rerun"),
    pytest.param("after:7", "rerun charge_card", id="charge-claimed-not-run-evs-rerun"),
    pytest.param("before:8", "respond charge_card", id="charge-ran-output-lost-evs-respond"),
    pytest.param("after:10", None, id="stopped-for-approval"),
])
def test_runner_survives_sigkill_at_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            point: str | None, decision: str | None) -> None:
    _killed_and_resumed(SCENARIO, tmp_path, monkeypatch, point, decision)


def _killed_and_resumed(scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        point: str | None, decision: str | None) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    outcome = run_scenario(scenario, db=str(tmp_path / "crash.db"), workdir=tmp_path / "w",
                           crash_point=point)
    assert outcome.error is None, outcome.error
    assert outcome.output == FINAL
    assert outcome.killed == (point is not None)
    assert extra_runs_that_count(outcome, scenario) == 0, outcome.extra_runs
    assert outcome.repeated_model_requests == 0
    assert "confirm ship_order" in outcome.decisions
    if decision is not None:
        assert any(d.startswith(decision) for d in outcome.decisions), outcome.decisions


# The agent-as-tool scenario's writes: 1 the session, 2 the run's start, 3 response 0, 4-5
# lookup_price's claim and output, 6 response 1, 7 the claim of the agent tool fulfil; in its
# child session: 8 the session, 9 the link and the nested run's start, 10 its response 0,
# 11-12 charge_card's claim and output, 13 its response 1, 14 its stop for ship_order's
# approval; 15 the parent's stop.
@pytest.mark.parametrize(("point", "decision"), [
    pytest.param(None, None, id="uninterrupted"),
    pytest.param("after:9", None, id="child-linked-nothing-run"),
    pytest.param("before:12", "respond charge_card", id="nested-charge-ran-output-lost"),
    pytest.param("after:14", None, id="nested-stop-recorded-parent-stop-lost"),
])
def test_runner_survives_sigkill_inside_an_agent_tool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str | None,
        decision: str | None) -> None:
    _killed_and_resumed(AS_TOOL, tmp_path, monkeypatch, point, decision)
