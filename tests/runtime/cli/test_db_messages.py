"""What ``--db`` and the schema revision say when they are wrong, ``--version --json``, and
what ``--json`` covers (errors stay one line on stderr)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from _cli_support import evs_subprocess, invoke

from eventstore._migrate import head_revision


def _set_revision(db: Path, revision: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))


@pytest.mark.parametrize("args", [
    pytest.param(["sessions"], id="sessions"),
    pytest.param(["show", "s1"], id="show"),
    pytest.param(["db", "current"], id="db-current"),
    pytest.param(["db", "upgrade"], id="db-upgrade"),
    pytest.param(["demo"], id="demo"),
])
def test_db_pointing_at_a_directory_says_so(tmp_path: Path, args: list[str]) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    result = invoke(*args, "--db", str(folder))
    assert result.exit_code == 1
    assert result.stderr == (f"evs: error: {folder} is a directory, not a database file (give "
                             "a file with --db or EVS_DATABASE_URL).\n")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("revision", ["0005", "ae1027a6"])
def test_a_revision_this_project_never_had_is_not_called_newer(
    paused_db: Path, revision: str
) -> None:
    _set_revision(paused_db, revision)
    current = invoke("db", "current", "--db", str(paused_db))
    assert current.exit_code == 0
    assert current.stdout.startswith(f"{revision} (a revision no agent-eventstore has ever had")
    assert "newer" not in current.stdout
    refused = invoke("sessions", "--db", str(paused_db))
    assert refused.exit_code == 1
    assert f"is at schema revision {revision}, which no version of agent-eventstore has " \
           "ever had" in refused.stderr
    assert "newer version migrated it" not in refused.stderr
    assert "pip install -U" not in refused.stderr


def test_a_later_revision_is_still_called_newer(paused_db: Path) -> None:
    later = f"{int(head_revision()) + 1:04d}"
    _set_revision(paused_db, later)
    current = invoke("db", "current", "--db", str(paused_db))
    assert current.stdout.startswith(f"{later} (newer than this agent-eventstore")


@pytest.mark.parametrize("order", [["--version", "--json"], ["--json", "--version"]])
def test_version_as_json(order: list[str]) -> None:
    result = invoke(*order)
    assert result.exit_code == 0, result.stderr
    shown = orjson.loads(result.stdout)
    assert shown["program"] == "evs"
    assert shown["package"] == "agent-eventstore"
    assert isinstance(shown["version"], str)


def test_top_level_json_without_version_is_bad_usage() -> None:
    result = evs_subprocess("--json")
    assert result.returncode == 2
    assert result.stderr.startswith("evs: error: Missing command. (--json goes after the "
                                    "command"), result.stderr


def test_an_error_under_json_is_one_line_on_stderr(paused_db: Path) -> None:
    result = invoke("show", "nope", "--db", str(paused_db), "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "evs: error: Session 'nope' does not exist.\n"
