"""``evs confirm`` and ``evs respond``: the runtime's answer APIs from the command line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from _cli_support import file_fingerprint, invoke


def _events(db: Path) -> list[dict[str, object]]:
    return orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)["events"]


def test_confirm_yes_appends_the_answer(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--yes", "--payload", '{"budget": 1}',
                    "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert "Confirmation confirm-1 of session s1 approved (seq 10)" in result.stdout
    last = _events(paused_db)[-1]
    assert last["author"] == "user"
    assert last["responses"] == [{
        "id": "confirm-1", "name": "adk_request_confirmation",
        "response": {"confirmed": True, "payload": {"budget": 1}}, "call_seq": 9,
        "error": False, "requests_confirmation": False}]
    pending = orjson.loads(invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)
    assert "confirmation" not in [p["kind"] for p in pending["pending"]]


def test_confirm_no_json_output(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--no", "--json", "--db", str(paused_db))
    assert orjson.loads(result.stdout) == {
        "session_id": "s1", "confirmation_id": "confirm-1", "confirmed": False, "payload": None,
        "seq": 10, "event_id": _events(paused_db)[-1]["id"]}


def test_confirm_twice_is_refused(paused_db: Path) -> None:
    assert invoke("confirm", "s1", "confirm-1", "--yes", "--db", str(paused_db)).exit_code == 0
    again = invoke("confirm", "s1", "confirm-1", "--no", "--db", str(paused_db))
    assert again.exit_code == 1
    assert "already answered at seq 10" in again.stderr
    assert len(again.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["confirm", "s1", "nope", "--yes"], "no confirmation request with id "
                     "'nope'", id="unknown-confirmation"),
        pytest.param(["confirm", "s1", "c4", "--yes"], "use submit_response()",
                     id="not-a-confirmation"),
        pytest.param(["confirm", "zz", "confirm-1", "--yes"], "Session 'zz' does not exist",
                     id="unknown-session"),
        pytest.param(["confirm", "s1", "confirm-1", "--yes", "--payload", "{bad"],
                     "--payload is not valid JSON", id="malformed-payload"),
        pytest.param(["respond", "s1", "c4", "--json", "{bad"], "--json is not valid JSON",
                     id="malformed-json"),
        pytest.param(["respond", "s1", "c4", "--json", "[1, 2]"], "must be a JSON object",
                     id="not-an-object"),
        pytest.param(["respond", "s1", "c1", "--json", "{}"], "already answered at seq 5",
                     id="already-answered"),
        pytest.param(["respond", "s1", "confirm-1", "--json", "{}"], "use answer_confirmation()",
                     id="confirmation-via-respond"),
        pytest.param(["respond", "s1", "nope", "--json", "{}"], "no function call with id "
                     "'nope'", id="unknown-call"),
    ],
)
def test_answer_errors_write_nothing(paused_db: Path, args: list[str], message: str) -> None:
    before = file_fingerprint(paused_db)
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert file_fingerprint(paused_db)[0] == before[0]


def test_confirm_needs_a_decision(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--db", str(paused_db))
    assert result.exit_code == 2
    assert "--yes" in result.stderr


def test_answers_never_create_a_database(db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--json", "{}", "--db", str(db))
    assert result.exit_code == 1
    assert "There is no database" in result.stderr
    assert not db.exists()


def test_respond_records_the_long_running_result(paused_db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--json", '{"days": ["sun", "rain"]}',
                    "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert "Result of call c4 of session s1 recorded (seq 10)" in result.stdout
    last = _events(paused_db)[-1]
    assert last["responses"][0]["name"] == "forecast"
    assert last["responses"][0]["response"] == {"days": ["sun", "rain"]}
    assert last["responses"][0]["call_seq"] == 6
    kinds = [p["kind"] for p in orjson.loads(
        invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)["pending"]]
    assert kinds == ["confirmation"]


def test_respond_reads_stdin_and_prints_json(paused_db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--json", "-", "--output", "json",
                    "--db", str(paused_db), input='{"ok": true}')
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["seq"] == 10


def _in_doubt_db(db: Path) -> Path:
    """Session s1: the agent called ``charge`` (c1), claimed it, and no response followed."""
    from _cli_support import AGENT, call, make_session

    from eventstore import Content, Event, Part

    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c1", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c1",)),
    ])
    return db


def test_pending_offers_rerun_or_respond_for_a_call_in_doubt(db: Path) -> None:
    _in_doubt_db(db)
    [item] = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)["pending"]
    assert item["kind"] == "in_doubt"
    assert f"evs rerun --db {db} s1 c1" in item["command"]
    assert f"evs respond --db {db} s1 c1" in item["command"]


def test_rerun_records_the_decision(db: Path) -> None:
    _in_doubt_db(db)
    result = invoke("rerun", "s1", "c1", "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["seq"] == 4
    raw = [orjson.loads(line) for line in
           invoke("show", "s1", "--db", str(db), "--raw").stdout.splitlines() if line.strip()]
    assert raw[-1]["author"] == "user"
    assert raw[-1]["schema_version"] == 2
    assert raw[-1]["payload"] == {"m": {"rerun_call_ids": ["c1"]}}  # the stored encoding
    pending = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)["pending"]
    assert "in_doubt" not in [p["kind"] for p in pending]


def test_rerun_refuses_an_answered_call(paused_db: Path) -> None:
    before = file_fingerprint(paused_db)
    result = invoke("rerun", "s1", "c1", "--db", str(paused_db))
    assert result.exit_code == 1
    assert "already answered" in result.stderr
    assert file_fingerprint(paused_db)[0] == before[0]
