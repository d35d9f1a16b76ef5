"""The crash-anywhere harness itself (``scripts/_crash_common.py``): a random kill's moment is
counted over the runner processes' time, so it lands in a process that resumed the run as well
as in the first one. Armed in the first process only, a moment past that process's stop at the
approval killed nothing: the pydantic-ai sweep of docs/frameworks.md killed in 1 of its 10
random runs, and no random kill ever reached a run resumed after an approval."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eventstore import open_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from _crash_common import Scenario, run_scenario  # noqa: E402

pytestmark = pytest.mark.slow

# The first process records the session and stops as if for an approval; the second (the
# resumed one) outlives any kill's moment; a third ends the run.
FAKE = """
import asyncio, sys
sys.path.insert(0, {scripts!r})
import _crash_common as crash
from eventstore import open_store

async def main(db: str, session: str) -> None:
    path = crash._workdir() / "starts.jsonl"
    before = len(path.read_text().splitlines()) if path.exists() else 0
    crash.say_start(recorded_model_turns=0)
    if before == 0:
        async with await open_store(db) as store:
            await store.create_session(app_name="app", user_id="u", session_id=session)
        crash.say_end(status="paused")
    elif before == 1:
        await asyncio.sleep(300)
        crash.say_end(status="done", output="the kill never came")
    else:
        crash.say_end(status="done", output="resumed")

options = crash.scenario_options()
asyncio.run(main(options.db, options.session))
"""


async def test_run_scenario_random_kill_lands_in_a_resumed_process(tmp_path: Path) -> None:
    module = tmp_path / "fake_scenario.py"
    module.write_text(FAKE.format(scripts=str(ROOT / "scripts")))
    db = str(tmp_path / "crash.db")
    async with await open_store(db, auto_upgrade=True):
        pass
    scenario = Scenario(framework="fake", module=module, idempotent_tools=frozenset())

    # 20 s of runner time: far more than the first process takes, far less than the second's.
    outcome = run_scenario(scenario, db=db, workdir=tmp_path / "w", kill_after=20.0,
                           timeout=60.0)

    assert outcome.error is None, outcome.error
    assert outcome.killed
    assert outcome.processes == 3
    assert outcome.output == "resumed"
    assert 20.0 <= outcome.runner_seconds < 60.0
