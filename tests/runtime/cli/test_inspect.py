"""``evs sessions``, ``show``, ``state``, ``pending`` and ``tail`` on real SQLite files."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
from _cli_support import (
    AGENT,
    REPO,
    build,
    file_fingerprint,
    finishing_log,
    invoke,
    make_session,
    paused_weather_log,
    text,
)

from eventstore import Content, Event, EventActions, EventStore


def test_sessions_lists_and_paginates(db: Path) -> None:
    for n in range(5):
        make_session(str(db), [], session_id=f"s{n}", user_id="ada" if n % 2 else "bob")
    first = invoke("sessions", "--db", str(db), "--limit", "2", "--sort", "id")
    assert first.exit_code == 0, first.stderr
    assert "s0" in first.stdout
    assert "s1" in first.stdout
    assert "s2" not in first.stdout
    assert "--after s1" in first.stdout
    data = orjson.loads(invoke("sessions", "--db", str(db), "--limit", "2", "--after", "s3",
                               "--sort", "id", "--json").stdout)
    assert [s["id"] for s in data["sessions"]] == ["s4"]
    assert data["next_cursor"] is None
    ada = orjson.loads(invoke("sessions", "--db", str(db), "--user", "ada", "--sort", "id",
                              "--json").stdout)
    assert [s["id"] for s in ada["sessions"]] == ["s1", "s3"]
    assert ada["sessions"][0]["app_name"] == "weather"
    assert ada["sessions"][0]["events"] == 0


def test_sessions_uses_env_database(paused_db: Path) -> None:
    result = invoke("sessions", "--json", env={"EVS_DATABASE_URL": str(paused_db)})
    assert orjson.loads(result.stdout)["sessions"][0]["events"] == 9


def test_show_timeline_pairs_calls_with_responses(paused_db: Path) -> None:
    result = invoke("show", "s1", "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Session s1  app weather  user ada  9 events" in out
    assert 'get_weather(city="Paris")' in out
    assert "answered at #5" in out
    assert 'get_weather(city="Atlantis")' in out
    assert "error at #5" in out
    assert "← get_weather [c2] (call #3) error:" in out
    assert "state last_city = \"Paris\"" in out
    assert 'forecast(days=3)' in out
    assert "pending (long-running" in out
    assert 'confirm paid_lookup(city="Paris")' in out
    assert "[c3, call #6]" in out
    assert f"evs confirm --db {paused_db} s1 confirm-1 --yes" in out
    assert "needs confirmation" in out


def test_show_json_window_and_raw(paused_db: Path) -> None:
    data = orjson.loads(invoke("show", "s1", "--db", str(paused_db), "--json").stdout)
    by_seq = {e["seq"]: e for e in data["events"]}
    assert [c["status"] for c in by_seq[3]["calls"]] == ["answered", "answered"]
    assert by_seq[5]["responses"][1]["error"] is True
    assert by_seq[5]["responses"][0]["call_seq"] == 3
    assert by_seq[6]["calls"][0]["status"] == "awaiting_confirmation"
    assert by_seq[6]["calls"][1]["status"] == "long_running"
    assert by_seq[9]["calls"][0]["confirmation"]["original_call"]["id"] == "c3"
    window = orjson.loads(invoke("show", "s1", "--db", str(paused_db), "--since", "4",
                                 "--last", "2", "--json").stdout)
    assert [e["seq"] for e in window["events"]] == [8, 9]
    # Pairing uses the whole log even when the call is outside the window.
    since = orjson.loads(invoke("show", "s1", "--db", str(paused_db), "--since", "5",
                                "--json").stdout)
    assert since["events"][0]["responses"][0]["call_seq"] == 3
    raw = invoke("show", "s1", "--db", str(paused_db), "--raw", "--last", "3")
    lines = [orjson.loads(line) for line in raw.stdout.splitlines()]
    assert [line["seq"] for line in lines] == [7, 8, 9]
    assert lines[-1]["kind"] == "confirmation_request"
    assert lines[-1]["payload"]["l"] == ["confirm-1"]  # the stored encoding (version 2)


def test_show_finished_session(db: Path) -> None:
    make_session(str(db), paused_weather_log() + finishing_log())
    out = invoke("show", "s1", "--db", str(db)).stdout
    assert "confirmation confirm-1 approved" in out
    assert "approved at #9" in out
    assert "artifact report.txt v0 saved" in out
    assert "last_city deleted" in out
    assert "waiting" not in out


def test_state_at_head_and_at_seq_with_origins(db: Path) -> None:
    make_session(str(db), paused_weather_log() + finishing_log(), state={"units": "metric"})
    make_session(str(db), [Event(author=AGENT, actions=EventActions(
        state_delta={"app:motd": "hi", "user:theme": "dark"}))], session_id="s2")
    head = orjson.loads(invoke("state", "s1", "--db", str(db), "--json").stdout)
    assert head["at"] == 14
    assert head["state"] == {"units": "metric", "paid": True, "user:units": "metric",
                             "app:motd": "hi", "user:theme": "dark"}
    keys = {row["key"]: (row["session_id"], row["seq"]) for row in head["keys"]}
    assert keys["paid"] == ("s1", 12)
    assert keys["app:motd"] == ("s2", 1)
    at5 = orjson.loads(invoke("state", "s1", "--db", str(db), "--at", "5", "--json").stdout)
    assert at5["state"] == {"units": "metric", "last_city": "Paris", "user:units": "metric"}
    table = invoke("state", "s1", "--db", str(db)).stdout
    assert "app:motd" in table
    assert "#1 of session s2" in table
    assert "#12" in table


def test_state_beyond_head_is_an_error(paused_db: Path) -> None:
    result = invoke("state", "s1", "--db", str(paused_db), "--at", "99")
    assert result.exit_code == 1
    assert "there is no seq 99" in result.stderr


def test_pending_lists_confirmation_and_long_running(paused_db: Path) -> None:
    result = invoke("pending", "s1", "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert 'confirmation: paid_lookup({"city":"Paris"})  [c3]' in out
    assert "hint: This lookup costs $0.10." in out
    assert f"evs confirm --db {paused_db} s1 confirm-1 --yes" in out
    assert "long running: forecast" in out
    assert f"evs respond --db {paused_db} s1 c4 --result" in out
    data = orjson.loads(invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)
    assert [(p["call_id"], p["kind"], p["confirmation_id"]) for p in data["pending"]] == [
        ("c4", "long_running", None), ("c3", "confirmation", "confirm-1")]
    assert data["pending"][1]["seq"] == 9


def test_pending_nothing_when_finished(db: Path) -> None:
    make_session(str(db), paused_weather_log() + finishing_log())
    result = invoke("pending", "s1", "--db", str(db))
    assert "Nothing is pending" in result.stdout


def test_tail_prints_new_events_until_max(paused_db: Path) -> None:
    def writer() -> None:
        time.sleep(0.5)

        async def work(store: EventStore) -> None:
            for n in range(3):
                await store.append("s1", Event(author="user", content=Content(
                    role="user", parts=(text(f"hello {n}"),))), expected_version=None)

        build(str(paused_db), work)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        result = invoke("tail", "s1", "--db", str(paused_db), "--max-events", "2",
                        "--timeout", "20", "--poll", "0.05")
    finally:
        thread.join()
    assert result.exit_code == 0, result.stderr
    assert "hello 0" in result.stdout
    assert "hello 1" in result.stdout
    assert "hello 2" not in result.stdout
    assert "#10" in result.stdout


def test_tail_after_seq_and_timeout(paused_db: Path) -> None:
    started = time.monotonic()
    result = invoke("tail", "s1", "--db", str(paused_db), "--after", "7", "--timeout", "0.5",
                    "--json")
    assert result.exit_code == 0, result.stderr
    assert time.monotonic() - started < 10
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [line["seq"] for line in lines] == [8, 9]
    # The response at seq 8 is paired with its call at seq 6, read before the cursor.
    assert lines[0]["responses"][0]["call_seq"] == 6


def test_read_commands_do_not_change_the_file(paused_db: Path) -> None:
    asyncio.run(asyncio.sleep(0))
    before = file_fingerprint(paused_db)
    for args in (["sessions"], ["show", "s1"], ["show", "s1", "--raw"], ["state", "s1"],
                 ["state", "s1", "--at", "3"], ["pending", "s1"], ["verify"], ["export", "s1"],
                 ["tail", "s1", "--timeout", "0.2"], ["db", "current"]):
        result = invoke(*args, "--db", str(paused_db))
        assert result.exit_code == 0, (args, result.stderr)
    assert file_fingerprint(paused_db) == before


def test_state_of_a_long_session_is_read_only(db: Path) -> None:
    deltas = [Event(author=AGENT, actions=EventActions(state_delta={"n": n})) for n in range(450)]
    make_session(str(db), deltas)
    before = file_fingerprint(db)
    result = invoke("state", "s1", "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["keys"] == [
        {"key": "n", "value": 449, "session_id": "s1", "seq": 450}]
    assert invoke("verify", "--db", str(db)).exit_code == 0
    assert file_fingerprint(db) == before


def test_tail_exits_cleanly_on_ctrl_c(paused_db: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "tail", "s1", "--db", str(paused_db),
         "--after", "8", "--poll", "0.05"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    first = child.stdout.readline()  # the event at seq 9 arrived: tail is following
    assert first.startswith("#9")
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=20)
    assert child.returncode == 130, err  # README: 130 after Ctrl-C
    assert "Traceback" not in err


def _listed(db: Path, *args: str) -> list[str]:
    result = invoke("sessions", "--db", str(db), "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [s["id"] for s in orjson.loads(result.stdout)["sessions"]]


def test_sessions_lists_by_last_update_newest_last(db: Path) -> None:
    for sid in ("b", "a", "d", "c"):
        make_session(str(db), [], session_id=sid)

    async def touch(store: EventStore) -> None:  # "b", the oldest, becomes the newest
        await store.append("b", Event(author="user"), expected_version=0)

    build(str(db), touch)
    assert _listed(db) == ["a", "d", "c", "b"]
    assert _listed(db, "--sort", "id") == ["a", "b", "c", "d"]
    page = invoke("sessions", "--db", str(db), "--limit", "3")
    rows = [line.split()[2] for line in page.stdout.splitlines()[1:4]]
    assert rows == ["d", "c", "b"]  # the newest three, newest last
    [hint] = [line for line in page.stdout.splitlines() if line.startswith("More (older): ")]
    older = invoke(*shlex.split(hint)[3:])
    assert [line.split()[2] for line in older.stdout.splitlines()[1:]] == ["a"]
    assert invoke("sessions", "--db", str(db), "--after", "nonsense").exit_code == 1
