"""Bad input: each error is one line on stderr and a non-zero exit, and nothing is written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _cli_support import file_fingerprint, invoke


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["sessions"], id="sessions"),
        pytest.param(["show", "s1"], id="show"),
        pytest.param(["state", "s1"], id="state"),
        pytest.param(["pending", "s1"], id="pending"),
        pytest.param(["tail", "s1", "--timeout", "0.1"], id="tail"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["export", "s1"], id="export"),
        pytest.param(["db", "current"], id="db-current"),
    ],
)
def test_missing_database_is_not_created(db: Path, args: list[str]) -> None:
    result = invoke(*args, "--db", str(db))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"evs: error: There is no database at {db} ")
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
    assert not db.exists()


def test_default_database_is_evs_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("sessions")
    assert result.exit_code == 1
    assert "There is no database at evs.db" in result.stderr
    assert not (tmp_path / "evs.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["show", "nope"], id="show"),
        pytest.param(["state", "nope"], id="state"),
        pytest.param(["pending", "nope"], id="pending"),
        pytest.param(["tail", "nope", "--timeout", "0.1"], id="tail"),
        pytest.param(["verify", "nope"], id="verify"),
        pytest.param(["export", "nope"], id="export"),
        pytest.param(["show", "nope", "--raw"], id="show-raw"),
    ],
)
def test_unknown_session(paused_db: Path, args: list[str]) -> None:
    before = file_fingerprint(paused_db)
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert result.stderr == "evs: error: Session 'nope' does not exist.\n"
    assert file_fingerprint(paused_db) == before


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["state", "s1"], id="state"),
        pytest.param(["pending", "s1"], id="pending"),
        pytest.param(["export", "s1"], id="export"),
        pytest.param(["tail", "s1", "--after", "0", "--timeout", "1"], id="tail"),
    ],
)
def test_corrupted_row_is_one_clear_line(paused_db: Path, args: list[str]) -> None:
    with sqlite3.connect(paused_db) as conn:
        conn.execute("UPDATE evs_events SET payload = ? WHERE session_id = 's1' AND seq = 3",
                     (b'{"author": "half an event"',))
    conn.close()
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    # tail first says (on stderr) what it follows.
    errors = [line for line in result.stderr.splitlines() if not line.startswith("following ")]
    assert len(errors) == 1
    assert errors[0].startswith("evs: error: Event 3 of session 's1' cannot be decoded:")
    assert errors[0].endswith("The log is damaged: evs verify s1 lists every problem.")


def test_show_renders_a_corrupted_row_where_it_is(paused_db: Path) -> None:
    with sqlite3.connect(paused_db) as conn:
        conn.execute("UPDATE evs_events SET payload = ? WHERE session_id = 's1' AND seq = 3",
                     (b'{"author": "half an event"',))
    conn.close()
    result = invoke("show", "s1", "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert "#3    (stored row" in result.stdout
    assert "      ! undecodable: the stored event cannot be decoded:" in result.stdout
    assert "#4 " in result.stdout


def test_schema_behind_head_prints_the_upgrade_command(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE unrelated (x INTEGER)")
    conn.close()
    before = file_fingerprint(db)
    result = invoke("show", "s1", "--db", str(db))
    assert result.exit_code == 1
    assert "Upgrade it with: evs db upgrade --db" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert file_fingerprint(db) == before


def test_bad_store_url_is_one_line() -> None:
    result = invoke("sessions", "--db", "mysql://nowhere/db")
    assert result.exit_code == 1
    assert result.stderr.startswith("evs: error: Unsupported store URL")
    assert len(result.stderr.splitlines()) == 1


def test_missing_import_file(db: Path, tmp_path: Path) -> None:
    result = invoke("import", str(tmp_path / "nope.jsonl"), "--db", str(db))
    assert result.exit_code == 1
    assert "Cannot read" in result.stderr
    assert not db.exists()


def test_unknown_command_and_bad_option_exit_non_zero(paused_db: Path) -> None:
    assert invoke("frobnicate").exit_code == 2
    assert invoke("show", "s1", "--db", str(paused_db), "--last", "-1").exit_code == 2


def test_a_command_refusing_before_it_runs_is_one_line(paused_db: Path) -> None:
    # evs mcp-server without the [mcp] extra refuses before its coroutine starts: still one
    # line and exit 1, never "internal error" (the MCP SDK is hidden from this child process).
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['mcp'] = None; sys.argv = ['evs', 'mcp-server', '--db', "
         f"{str(paused_db)!r}]; from runtime.cli import main; main()"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert child.returncode == 1, child.stderr
    assert child.stderr.startswith("evs: error: evs mcp-server: runtime.mcp needs the MCP SDK")
    assert "install agent-eventstore[mcp]" in child.stderr
    assert "internal error" not in child.stderr
    assert len(child.stderr.strip().splitlines()) == 1
