"""One rule for every command that answers a session: nothing is appended to a log that
``evs verify`` flags (``confirm``, ``respond``, ``rerun`` and ``demo --resume`` alike); and the
store's tampered-log message names a command that runs, under the program's name as invoked."""

from __future__ import annotations

import asyncio
import shlex
import sqlite3
from pathlib import Path

import orjson
import pytest
import typer
from _cli_support import invoke, make_session, paused_weather_log

from eventstore import Event, TamperedLogError, open_store
from eventstore.commands import errors
from eventstore.commands._common import name_program, prog


def _paused_demo(db: Path) -> tuple[str, str]:
    result = invoke("demo", "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["status"] == "paused_for_confirmation"
    return summary["session_id"], summary["pending_confirmation_ids"][0]


def _versions(db: Path, session_id: str) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT count(*) FROM evs_events WHERE session_id = ?",
                                (session_id,)).fetchone()
    return int(count)


def test_demo_resume_approve_refuses_a_log_verify_flags_as_confirm_does(db: Path) -> None:
    session_id, confirmation_id = _paused_demo(db)
    with sqlite3.connect(db) as conn:  # a hand edit: the head still matches, seq 2 is gone
        conn.execute("DELETE FROM evs_events WHERE session_id = ? AND seq = 2", (session_id,))
    assert invoke("verify", session_id, "--db", str(db)).exit_code == 3
    before = _versions(db, session_id)

    confirm = invoke("confirm", session_id, confirmation_id, "--yes", "--db", str(db))
    demo = invoke("demo", "--resume", session_id, "--approve", "--db", str(db))

    assert confirm.exit_code == 1
    assert demo.exit_code == 1, demo.stdout
    assert _versions(db, session_id) == before
    for result, command in ((confirm, "confirm"), (demo, "demo")):
        assert "integrity problem(s) (seq 3: seq_gap: seq 2 is missing" in result.stderr
        assert (f"evs {command} appends nothing to a damaged log. See: evs verify "
                f"{session_id}") in result.stderr


@pytest.mark.parametrize("session_id", ["s1", "it's mine"])
def test_tampered_log_message_names_a_command_that_runs(
    db: Path, capsys: pytest.CaptureFixture[str], session_id: str
) -> None:
    make_session(str(db), paused_weather_log(), session_id=session_id)
    with sqlite3.connect(db) as conn:  # the tail removed behind the store's back
        conn.execute("DELETE FROM evs_events WHERE session_id = ? AND seq = 8", (session_id,))

    async def append() -> TamperedLogError:
        async with await open_store(str(db)) as store:
            with pytest.raises(TamperedLogError) as caught:
                await store.append(session_id, Event(author="user"), expected_version=None)
            return caught.value

    tampered = asyncio.run(append())
    name_program(".venv/bin/evs")
    try:
        with pytest.raises(typer.Exit), errors():
            raise tampered
        assert prog() == ".venv/bin/evs"
    finally:
        name_program("evs")
    message = capsys.readouterr().err
    suggested = f".venv/bin/evs verify {shlex.quote(session_id)}"
    assert suggested in message, message
    assert "--session" not in message
    # What it suggests is a real command line: verify runs and finds the damage (3), no
    # usage error (2).
    words = shlex.split(suggested)[1:]
    assert invoke(*words, "--db", str(db)).exit_code == 3
