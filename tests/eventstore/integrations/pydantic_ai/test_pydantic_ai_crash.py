"""SIGKILL at chosen points of a pydantic-ai run through ``EventStoreAgent`` (the harness of
``scripts/crash_anywhere.py``, a handful of its points): new processes resume it from the log,
with ``evs`` answering between them, to the uninterrupted run's output — no tool that is not
idempotent runs twice, no recorded model response is asked for again."""

from __future__ import annotations

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "scripts"))

from _crash_common import extra_runs_that_count, run_scenario  # noqa: E402
from crash_anywhere import SCENARIOS  # noqa: E402

pytestmark = pytest.mark.slow
EXPECTED = "Ordered the book for 12; receipt r-12, tracking t-book."


@pytest.fixture(autouse=True)
def _our_code(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scenario's processes and the evs commands between them import this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH", "")])))


@pytest.mark.parametrize("point", [
    pytest.param("after:3", id="after-the-first-model-turn"),
    pytest.param("before:5", id="lookup-ran-result-not-recorded"),
    pytest.param("before:9", id="charge-ran-result-not-recorded"),
    pytest.param("after:12", id="after-the-approval-request"),
])
def test_pydantic_ai_killed_run_resumes_to_the_same_output(tmp_path: Path, point: str) -> None:
    scenario = SCENARIOS["pydantic-ai"]
    outcome = run_scenario(scenario, db=str(tmp_path / "crash.db"), workdir=tmp_path / "w",
                           crash_point=point)
    assert outcome.error is None, outcome.error
    assert outcome.killed
    assert outcome.output == EXPECTED
    assert extra_runs_that_count(outcome, scenario) == 0
    assert outcome.repeated_model_requests == 0
