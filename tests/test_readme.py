"""The README's complete Python examples run as written (so they stay true)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eventstore import open_store

README = Path(__file__).resolve().parent.parent / "README.md"


def _runnable_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if "asyncio.run(main())" in b]


def test_readme_has_runnable_examples() -> None:
    assert len(_runnable_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_runnable_blocks())))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_runnable_blocks()[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr


def test_readme_runtime_example_runs_the_confirmed_call_once(tmp_path: Path) -> None:
    [example] = [b for b in _runnable_blocks() if "answer_confirmation" in b]
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed Paris: 22°C")

    async def paid_results() -> list[dict[str, object]]:
        async with await open_store(tmp_path / "weather.db") as store:
            [info] = (await store.list_sessions(app_name="weather")).sessions
            return [
                r.response
                for e in await store.read(info.id)
                for r in e.function_responses()
                if r.name == "paid_forecast"
            ]

    results = asyncio.run(paid_results())
    assert [r for r in results if "summary" in r] == [
        {"city": "Paris", "days": 7, "summary": "dry, highs of 24°C"}
    ]
