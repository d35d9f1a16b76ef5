"""``evs fork`` and the fork links ``evs show`` prints on both sides, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import orjson
from _cli_support import invoke


def test_fork_makes_a_session_and_show_prints_both_sides(paused_db: Path) -> None:
    result = invoke("fork", "s1", "--at", "9", "--new-id", "alt", "--db", str(paused_db))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Forked session s1 at seq 9 into alt (9 events" in result.stdout
    shown = invoke("show", "alt", "--db", str(paused_db)).stdout
    assert "Forked from session s1 at seq 9" in shown
    assert "Forked at seq 9 into session alt" in invoke("show", "s1", "--db",
                                                        str(paused_db)).stdout
    data = orjson.loads(invoke("show", "s1", "--db", str(paused_db), "--json").stdout)
    assert [(f["session_id"], f["seq"]) for f in data["links"]["forks"]] == [("alt", 9)]
    assert data["links"]["forked_from"] is None
    fork_data = orjson.loads(invoke("show", "alt", "--db", str(paused_db), "--json").stdout)
    assert fork_data["links"]["forked_from"] == {"session_id": "s1", "seq": 9, "exists": True}
    assert fork_data["events"] == data["events"]


def test_fork_json_and_generated_id(paused_db: Path) -> None:
    result = invoke("fork", "s1", "--at", "5", "--db", str(paused_db), "--json")
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert (data["origin_session_id"], data["origin_seq"], data["events"]) == ("s1", 5, 5)
    assert len(data["session_id"]) == 32


def test_fork_refusals_are_one_line_errors(paused_db: Path) -> None:
    inside = invoke("fork", "s1", "--at", "7", "--db", str(paused_db))
    assert inside.exit_code == 1
    assert inside.stderr.startswith("evs: error: Session 's1' cannot be forked at seq 7")
    assert "5 (before) or 9 (after)" in inside.stderr
    assert inside.stderr.count("\n") == 1
    beyond = invoke("fork", "s1", "--at", "10", "--db", str(paused_db))
    assert beyond.exit_code == 1
    assert "has events 1..9" in beyond.stderr
    missing = invoke("fork", "nope", "--at", "1", "--db", str(paused_db))
    assert missing.exit_code == 1
    assert "Session 'nope' does not exist" in missing.stderr
    invoke("fork", "s1", "--at", "5", "--new-id", "taken", "--db", str(paused_db))
    taken = invoke("fork", "s1", "--at", "5", "--new-id", "taken", "--db", str(paused_db))
    assert taken.exit_code == 1
    assert "Session 'taken' already exists" in taken.stderr
    usage = invoke("fork", "s1", "--db", str(paused_db))
    assert usage.exit_code == 2


def test_show_names_a_deleted_origin(paused_db: Path) -> None:
    invoke("fork", "s1", "--at", "9", "--new-id", "alt", "--db", str(paused_db))
    assert invoke("delete", "s1", "--yes", "--db", str(paused_db)).exit_code == 0
    shown = invoke("show", "alt", "--db", str(paused_db))
    assert shown.exit_code == 0
    assert "Forked from session s1 at seq 9 (that session was deleted since)" in shown.stdout
