"""The ADK crash scenario (``scripts/_crash_adk.py``) SIGKILLed at chosen writes and resumed in
new processes, answered between them with the real ``evs pending`` / ``confirm`` / ``respond`` /
``rerun`` (the harness of ``scripts/crash_anywhere.py``, a few points of its sweep)."""

from __future__ import annotations

import sys
from pathlib import Path

from _extras import require_extra

require_extra("google.adk", "adk")

import pytest  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from _crash_common import Scenario, run_scenario  # noqa: E402

FINAL = "Ordered the book for 12; receipt r-12, tracking t-book."
ADK = Scenario(framework="adk", module=SCRIPTS / "_crash_adk.py",
               idempotent_tools=frozenset({"lookup_price"}))


@pytest.fixture(autouse=True)
def _worktree_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario and ``evs`` processes import this checkout's packages."""
    monkeypatch.setenv("PYTHONPATH", str(SCRIPTS.parent))


@pytest.mark.parametrize(("point", "decision"), [
    # Write 8 is charge_card's result: killed before it, the card was charged and the log
    # does not say so; the operator finds the effect and records it.
    pytest.param("before:8", "respond charge_card (its effect happened)", id="charged-unrecorded"),
    # Write 7 is charge_card's claim: killed right after it, the card was not charged.
    pytest.param("after:7", "rerun charge_card (its effect did not happen)", id="claimed-only"),
])
def test_adk_run_killed_mid_payment_resumes_without_charging_twice(
    tmp_path: Path, point: str, decision: str
) -> None:
    outcome = run_scenario(ADK, db=str(tmp_path / "crash.db"), workdir=tmp_path,
                           crash_point=point)
    assert outcome.error is None
    assert outcome.killed
    assert outcome.output == FINAL
    assert outcome.extra_runs == {}
    assert outcome.repeated_model_requests == 0
    assert outcome.decisions == [decision, "confirm ship_order"]
