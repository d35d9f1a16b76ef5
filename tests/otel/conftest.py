"""Fixtures for the OpenTelemetry export tests: a demo session in a real SQLite file."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime" / "cli"))

from _cli_support import invoke


@pytest.fixture(autouse=True)
def _no_env_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVS_DATABASE_URL", raising=False)


@pytest.fixture
def demo_db(tmp_path: Path) -> tuple[Path, str]:
    """A SQLite file holding one finished ``evs demo --approve`` session, and its id."""
    db = tmp_path / "evs.db"
    result = invoke("demo", "--approve", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    return db, orjson.loads(result.stdout)["session_id"]
