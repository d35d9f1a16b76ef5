"""The real entry points of the ``evs`` program: the console script and ``python -m runtime.cli``
(the store-only ``python -m eventstore.commands`` is tested in ``tests/eventstore/commands``)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from _cli_support import REPO, evs_subprocess

import runtime.cli
from eventstore import EventStore

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

RUNTIME_COMMANDS = ("demo", "pending", "confirm", "respond", "rerun", "web")
STORE_COMMANDS = ("sessions", "show", "state", "tail", "verify", "export", "import", "db",
                  "prune", "retention")


def test_program_exported_members() -> None:
    assert runtime.cli.__all__ == ["app", "main"]
    assert callable(runtime.cli.main)


def test_module_entry_point_help() -> None:
    result = evs_subprocess("--help")
    assert result.returncode == 0
    commands = result.stdout.split("Commands:")[1].split()
    for command in (*RUNTIME_COMMANDS, *STORE_COMMANDS):
        assert command in commands


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
        [sys.executable, "-m", "runtime.cli", "import", "-", "--db", str(target)],
        input=exported.stdout, capture_output=True, text=True, cwd=REPO, check=False)
    assert imported.returncode == 0, imported.stderr
    again = evs_subprocess("export", "s1", "--db", str(target))
    if "created_at" in inspect.signature(EventStore.create_session).parameters:
        assert again.stdout == exported.stdout
    else:  # the store stamps the import time as the copy's created_at
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
    assert "demo" in subprocess.run([str(script), "--help"], capture_output=True, text=True,
                                    check=False).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["show"], "evs: error: Missing argument 'SESSION_ID'. (see: ",
                     id="missing-argument"),
        pytest.param(["frobnicate"], "evs: error: No such command 'frobnicate'.",
                     id="unknown-command"),
        pytest.param(["sessions", "--limit", "x"], "evs: error: Invalid value for '--limit': ",
                     id="bad-value"),
        pytest.param(["show", "s1", "--colour"], "evs: error: No such option: --colour",
                     id="unknown-option"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(args: list[str], message: str) -> None:
    result = evs_subprocess(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1


def test_no_command_prints_the_help() -> None:
    result = evs_subprocess()
    assert result.returncode == 2
    assert "Commands:" in result.stdout + result.stderr
