"""The real entry points (``python -m eventstore.cli``, the ``evs`` script), the exported surface,
and the rule that importing ``eventstore`` never imports ``runtime``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from _cli_support import REPO, evs_subprocess

import eventstore.cli


def test_cli_exported_members() -> None:
    assert sorted(eventstore.cli.__all__) == ["app", "main"]
    assert callable(eventstore.cli.main)


def test_importing_the_cli_does_not_import_runtime() -> None:
    code = ("import sys, eventstore, eventstore.cli, eventstore.cli._app; "
            "assert not [m for m in sys.modules if m == 'runtime' or m.startswith('runtime.')], "
            "sorted(m for m in sys.modules if m.startswith('runtime'))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_module_entry_point_help() -> None:
    result = evs_subprocess("--help")
    assert result.returncode == 0
    for command in ("demo", "sessions", "show", "state", "pending", "confirm", "respond",
                    "verify", "export", "import", "tail", "db"):
        assert command in result.stdout


def test_subprocess_show_state_and_errors(paused_db: Path) -> None:
    shown = evs_subprocess("show", "s1", "--db", str(paused_db))
    assert shown.returncode == 0, shown.stderr
    assert "← get_weather [c1] (call #3)" in shown.stdout
    state = evs_subprocess("state", "s1", "--json", env={"EVS_DATABASE_URL": str(paused_db)})
    assert orjson.loads(state.stdout)["state"]["last_city"] == "Paris"
    missing = evs_subprocess("show", "s1", "--db", str(paused_db.with_name("nope.db")))
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1
    assert "Traceback" not in missing.stderr
    unknown = evs_subprocess("state", "zz", "--db", str(paused_db))
    assert (unknown.returncode, unknown.stderr) == (1, "evs: error: Session 'zz' does not "
                                                       "exist.\n")


def test_subprocess_export_pipe_import(paused_db: Path, tmp_path: Path) -> None:
    exported = evs_subprocess("export", "s1", "--db", str(paused_db))
    assert exported.returncode == 0, exported.stderr
    target = tmp_path / "copy.db"
    imported = subprocess.run(
        [sys.executable, "-m", "eventstore.cli", "import", "-", "--db", str(target)],
        input=exported.stdout, capture_output=True, text=True, cwd=REPO, check=False)
    assert imported.returncode == 0, imported.stderr
    again = evs_subprocess("export", "s1", "--db", str(target))
    # Events are byte-identical; the header's created_at is the new session's.
    assert again.stdout.splitlines()[1:] == exported.stdout.splitlines()[1:]


def test_console_script(paused_db: Path) -> None:
    script = Path(sys.executable).parent / "evs"
    if not script.exists():
        pytest.skip(f"the evs console script is not installed next to {sys.executable} "
                    "(pip install -e . creates it)")
    result = subprocess.run([str(script), "sessions", "--db", str(paused_db), "--json"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["sessions"][0]["id"] == "s1"
