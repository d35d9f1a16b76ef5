"""``evs verify``, ``export``/``import`` and ``db upgrade``/``db current`` on real databases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from _cli_support import (
    AGENT,
    FINISHING_ARTIFACTS,
    build,
    finishing_log,
    invoke,
    make_session,
    paused_weather_log,
    response,
)

from eventstore import Content, Event, EventActions, EventStore
from eventstore._migrate import head_revision
from eventstore.backends.protocol import HeadState


def _sql(db: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(statement, params)
    conn.close()


def test_verify_clean_database(paused_db: Path) -> None:
    make_session(str(paused_db), paused_weather_log() + finishing_log(), session_id="s2",
                 artifacts=FINISHING_ARTIFACTS)
    result = invoke("verify", "--db", str(paused_db))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "OK: 2 sessions verified" in result.stdout
    data = orjson.loads(invoke("verify", "s1", "--db", str(paused_db), "--json").stdout)
    assert data == {"sessions_checked": 1, "ok": True, "findings": []}


def test_verify_reports_corrupted_row_gap_and_orphan(paused_db: Path) -> None:
    make_session(str(paused_db), [Event(author="user", content=Content(role="user", parts=(
        response("ghost", "get_weather", ok=True),)))], session_id="s2")
    _sql(paused_db, "UPDATE evs_events SET payload = ? WHERE session_id = 's1' AND seq = 4",
         b"\x00garbage")
    _sql(paused_db, "DELETE FROM evs_events WHERE session_id = 's1' AND seq = 6")
    result = invoke("verify", "--db", str(paused_db))
    assert result.exit_code == 3
    out = result.stdout
    assert "s1  seq 4  undecodable" in out
    assert "s1  seq 7  seq_gap: seq 6 is missing before seq 7." in out
    assert "s2  seq 1  response_without_call" in out
    data = orjson.loads(invoke("verify", "--db", str(paused_db), "--json").stdout)
    assert data["ok"] is False
    assert {(f["session_id"], f["seq"], f["code"]) for f in data["findings"]} >= {
        ("s1", 4, "undecodable"), ("s1", 7, "seq_gap"), ("s2", 1, "response_without_call")}


def test_verify_reports_stale_snapshot(db: Path) -> None:
    async def work(store: EventStore) -> None:
        session = await store.create_session(app_name="weather", user_id="ada", session_id="s1")
        events = [Event(author=AGENT, actions=EventActions(state_delta={"n": n}))
                  for n in range(1, 6)]
        await store.append(session.id, events, expected_version=0)
        third = (await store.backend.read("s1", after=2, upto=3, backwards=False, limit=1))[0]
        assert third.chain_hash is not None
        # Bound to the event at seq 3 (a stale cache the log still vouches for): reported.
        await store.backend.save_snapshot("s1", HeadState(
            seq=3, chain_hash=third.chain_hash, state=orjson.dumps({"n": 99})))

    build(str(db), work)
    result = invoke("verify", "s1", "--db", str(db))
    assert result.exit_code == 3
    assert "s1  seq 3  snapshot_mismatch" in result.stdout


def test_export_import_round_trip_is_lossless(tmp_path: Path, db: Path) -> None:
    make_session(str(db), paused_weather_log() + finishing_log(), state={"units": "metric"},
                 artifacts=FINISHING_ARTIFACTS)
    exported = invoke("export", "s1", "--db", str(db))
    assert exported.exit_code == 0, exported.stderr
    lines = exported.stdout_bytes.splitlines()
    header = orjson.loads(lines[0])
    assert (header["app_name"], header["user_id"], header["session_id"]) == ("weather", "ada",
                                                                              "s1")
    assert (header["events"], header["artifacts"]) == (14, 1)
    assert len(lines) == 1 + 14 + 1
    assert orjson.loads(lines[-1]) == {"artifact": {
        "filename": "report.txt", "version": 0, "mime_type": "text/plain",
        "created_at": orjson.loads(lines[-1])["artifact"]["created_at"],
        "data": "UGFyaXM6IDIxwrBDIGFuZCBzdW5ueTsgcmFpbiBvbiBUdWVzZGF5Lgo="}}
    dump = tmp_path / "s1.jsonl"
    dump.write_bytes(exported.stdout_bytes)

    other = tmp_path / "other.db"
    imported = invoke("import", str(dump), "--db", str(other))  # a new file is created
    assert imported.exit_code == 0, imported.stderr
    assert "Imported 14 events and 1 artifact version(s) into session s1" in imported.stdout
    again = invoke("import", str(dump), "--db", str(other), "--session-id", "copy", "--json")
    assert orjson.loads(again.stdout) == {"session_id": "copy", "events": 14, "artifacts": 1}

    for sid in ("s1", "copy"):
        out = invoke("export", sid, "--db", str(other)).stdout_bytes.splitlines()
        assert out[1:] == lines[1:]
        assert orjson.loads(out[0])["session_id"] == sid
    # The copy beside s1 is a copy as evs fork makes (its user: change counts in s1 once).
    shown = orjson.loads(invoke("show", "copy", "--db", str(other), "--json").stdout
                         .replace("copy", "s1"))
    assert shown["links"].pop("forked_from") == {"session_id": "s1", "seq": 14, "exists": True}
    original = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)
    assert original["links"].pop("forked_from") is None
    assert shown == original
    assert invoke("verify", "--db", str(other)).exit_code == 0


def test_import_never_overwrites(tmp_path: Path, paused_db: Path) -> None:
    dump = tmp_path / "s1.jsonl"
    invoke("export", "s1", "--db", str(paused_db), "--output", str(dump))
    before = invoke("export", "s1", "--db", str(paused_db)).stdout
    result = invoke("import", str(dump), "--db", str(paused_db))
    assert result.exit_code == 1
    assert "Session 's1' already exists" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert invoke("export", "s1", "--db", str(paused_db)).stdout == before


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(lambda lines: [*lines[:3], b"{not json", *lines[4:]], "line 4",
                     id="malformed-json"),
        pytest.param(lambda lines: [*lines[:2], b'{"author": 5}', *lines[3:]], "line 3",
                     id="invalid-event"),
        pytest.param(lambda lines: lines[:-1], "announces 9 events", id="truncated"),
        pytest.param(lambda lines: [b'{"format": "x"}', *lines[1:]], "not an export",
                     id="not-an-export"),
    ],
)
def test_import_validates_every_line_before_writing(tmp_path: Path, paused_db: Path,
                                                    mutate, message) -> None:  # type: ignore[no-untyped-def]
    lines = invoke("export", "s1", "--db", str(paused_db)).stdout_bytes.splitlines()
    dump = tmp_path / "bad.jsonl"
    dump.write_bytes(b"\n".join(mutate(lines)) + b"\n")
    result = invoke("import", str(dump), "--db", str(paused_db), "--session-id", "new")
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "new" not in invoke("sessions", "--db", str(paused_db)).stdout


def test_import_from_stdin(paused_db: Path) -> None:
    dump = invoke("export", "s1", "--db", str(paused_db)).stdout
    result = invoke("import", "-", "--db", str(paused_db), "--session-id", "piped",
                    input=dump)
    assert result.exit_code == 0, result.stderr
    assert "9 events" in result.stdout


def test_db_upgrade_then_current(db: Path) -> None:
    missing = invoke("db", "current", "--db", str(db))
    assert missing.exit_code == 1
    assert "There is no database" in missing.stderr
    assert not db.exists()
    upgraded = invoke("db", "upgrade", "--db", str(db))
    assert upgraded.exit_code == 0, upgraded.stderr
    assert f"to {head_revision()}" in upgraded.stdout
    assert "Already at head" in invoke("db", "upgrade", "--db", str(db)).stdout
    current = orjson.loads(invoke("db", "current", "--db", str(db), "--json").stdout)
    assert current == {"current": head_revision(), "head": head_revision(), "at_head": True,
                       "newer": False}
    assert invoke("sessions", "--db", str(db)).exit_code == 0


def test_db_current_on_a_database_without_schema(db: Path) -> None:
    _sql(db, "CREATE TABLE unrelated (x INTEGER)")
    result = invoke("db", "current", "--db", str(db))
    assert result.exit_code == 0
    assert "no schema" in result.stdout
    assert "evs db upgrade" in result.stdout
