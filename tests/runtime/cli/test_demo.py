"""``evs demo``: the real runtime on a SQLite file, paused on a confirmation and finished."""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from _cli_support import REPO, evs_subprocess, invoke, make_session

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow


def _session(db: Path) -> str:
    [session] = orjson.loads(invoke("sessions", "--db", str(db), "--json").stdout)["sessions"]
    assert session["app_name"] == "weather-demo"
    return str(session["id"])


def test_demo_approve_runs_the_main_job_to_the_end(db: Path) -> None:
    result = invoke("demo", "--approve", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert '→ get_weather(city="Paris")' in out
    assert '→ get_weather(city="Atlantis")' in out
    assert "error: " in out
    assert "no station in Atlantis" in out
    assert 'state last_city = "Paris"' in out
    assert '? confirm paid_forecast(city="Paris", days=7)' in out
    assert "Approving confirm-" in out
    assert "artifact paris-forecast.md v0 saved" in out
    assert "through the respond API" in out
    assert "Done: session demo-" in out
    sid = _session(db)
    assert invoke("verify", "--db", str(db)).exit_code == 0
    assert "Nothing is pending" in invoke("pending", sid, "--db", str(db)).stdout
    shown = orjson.loads(invoke("show", sid, "--db", str(db), "--json").stdout)["events"]
    assert shown[-1]["text"].startswith("Paris: 22°C")
    assert [c["status"] for e in shown for c in e["calls"]] == ["answered"] * len(
        [c for e in shown for c in e["calls"]])
    state = orjson.loads(invoke("state", sid, "--db", str(db), "--json").stdout)["state"]
    assert state == {"last_city": "Paris", "forecast_cost_usd": 0.05}


def test_demo_pauses_and_another_process_confirms(db: Path) -> None:
    paused = invoke("demo", "--db", str(db))
    assert paused.exit_code == 0, paused.stderr
    assert "Paused: a human must confirm the paid call." in paused.stdout
    assert "Done" not in paused.stdout
    [command] = re.findall(r"^\s+(evs confirm .* --yes)$", paused.stdout, flags=re.M)
    sid = _session(db)
    assert command.startswith(f"evs confirm --db {db} {sid} confirm-")
    kinds = [p["kind"] for p in orjson.loads(
        invoke("pending", sid, "--db", str(db), "--json").stdout)["pending"]]
    assert kinds == ["confirmation"]

    # Resuming before anyone answered pauses again without calling the model.
    again = invoke("demo", "--db", str(db), "--resume", sid)
    assert "Paused: a human must confirm" in again.stdout

    confirmed = evs_subprocess(*shlex.split(command)[1:])
    assert confirmed.returncode == 0, confirmed.stderr
    assert "approved" in confirmed.stdout

    finished = evs_subprocess("demo", "--db", str(db), "--resume", sid)
    assert finished.returncode == 0, finished.stderr
    assert "paid_forecast [call-forecast]" in finished.stdout
    assert f"Done: session {sid} is complete" in finished.stdout
    assert invoke("verify", sid, "--db", str(db)).exit_code == 0
    assert "Nothing is pending" in invoke("pending", sid, "--db", str(db)).stdout


def test_demo_json_is_one_summary(db: Path) -> None:
    result = invoke("demo", "--approve", "--json", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["status"] == "completed"
    assert summary["session_id"] == _session(db)
    assert summary["pending_confirmation_ids"] == []
    assert summary["next_command"] == f"evs show --db {db} {summary['session_id']}"
    assert [e["seq"] for e in summary["events"]] == list(range(1, len(summary["events"]) + 1))


def test_demo_json_when_paused_names_the_confirmations(db: Path) -> None:
    result = invoke("demo", "--json", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["status"] == "paused_for_confirmation"
    [cid] = summary["pending_confirmation_ids"]
    assert cid.startswith("confirm-")
    assert summary["next_command"] == (f"evs demo --db {db} --resume {summary['session_id']}")


def test_demo_creates_its_session_with_the_question(db: Path) -> None:
    result = invoke("demo", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    sid = _session(db)
    first = orjson.loads(invoke("show", sid, "--db", str(db), "--json").stdout)["events"][0]
    assert first["author"] == "user"
    assert first["text"].startswith("What's the weather in Paris")


def test_demo_resume_refuses_a_session_without_the_question(db: Path) -> None:
    make_session(str(db), [], session_id="demo-empty", app_name="weather-demo",
                 user_id="demo-user")
    result = invoke("demo", "--db", str(db), "--resume", "demo-empty")
    assert result.exit_code == 1
    assert "has no user message" in result.stderr
    assert orjson.loads(invoke("show", "demo-empty", "--db", str(db), "--json").stdout)[
        "events"] == []


def test_demo_resume_ends_when_the_planner_pauses(db: Path) -> None:
    """A tampered confirmation: the resume must end instead of spinning (it once ran for
    minutes). The edit breaks the hash chain, so it now ends before the planner is asked, with
    the refusal every answering command gives on a log evs verify flags."""
    assert invoke("demo", "--db", str(db)).exit_code == 0
    sid = _session(db)
    [item] = orjson.loads(invoke("pending", sid, "--db", str(db), "--json").stdout)["pending"]
    assert invoke("confirm", sid, item["confirmation_id"], "--yes", "--db",
                  str(db)).exit_code == 0
    with sqlite3.connect(db) as conn:
        changed = conn.execute(
            "UPDATE evs_events SET payload = CAST(replace(CAST(payload AS TEXT), "
            "'\"days\":7}', '\"days\":8}') AS BLOB) WHERE kind = 'confirmation_request'"
        ).rowcount
    assert changed == 1
    result = evs_subprocess("demo", "--db", str(db), "--resume", sid, "--json", timeout=60)
    assert result.returncode == 1, result.stderr
    assert "chain_edited" in result.stderr
    assert "demo appends nothing to a damaged log" in result.stderr
    assert result.stdout == ""


def test_demo_resume_of_a_finished_session_ends(db: Path) -> None:
    assert invoke("demo", "--approve", "--db", str(db)).exit_code == 0
    sid = _session(db)
    result = evs_subprocess("demo", "--db", str(db), "--resume", sid, "--approve", "--json",
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["status"] == "completed"


def test_demo_resume_approve_races_end_cleanly(db: Path) -> None:
    """Two processes resume and approve the same paused session: one answers, the other sees
    the answer, and neither prints a traceback."""
    assert invoke("demo", "--db", str(db)).exit_code == 0
    sid = _session(db)
    args = [sys.executable, "-m", "runtime.cli", "demo", "--db", str(db), "--resume", sid,
            "--approve"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outcomes = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outcomes, strict=True):
        assert "Traceback" not in err, err
        assert proc.returncode in (0, 1), err
        if proc.returncode == 1:
            assert len(err.splitlines()) == 1, err
    assert any(p.returncode == 0 for p in procs)
    assert invoke("verify", sid, "--db", str(db)).exit_code == 0


def test_demo_resume_refuses_other_sessions(paused_db: Path) -> None:
    result = invoke("demo", "--db", str(paused_db), "--resume", "s1")
    assert result.exit_code == 1
    assert "is not a demo session" in result.stderr


def test_demo_on_the_default_database(tmp_path: Path) -> None:
    result = evs_subprocess("demo", "--approve", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "evs.db").is_file()
    assert "Done: session demo-" in result.stdout
    # Printed commands start with the program as invoked (here python -m runtime.cli).
    assert " -m runtime.cli show demo-" in result.stdout


def test_printed_commands_use_the_program_as_invoked(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "evs"
    if not script.is_file():
        pytest.skip("the evs console script is not installed next to this Python")
    relative = os.path.relpath(script, tmp_path)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    result = subprocess.run([relative, "demo"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    [command] = re.findall(r"^\s+(.* confirm .* --yes)$", result.stdout, flags=re.M)
    assert command.startswith(f"{relative} confirm demo-")
    # The printed line runs as it is, without an activated virtual environment.
    confirmed = subprocess.run(shlex.split(command), cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120, check=False)
    assert confirmed.returncode == 0, confirmed.stderr


def test_demo_loads_the_report_artifact(db: Path) -> None:
    result = invoke("demo", "--approve", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    assert '→ load_artifacts(artifact_names=["paris-forecast.md"])' in result.stdout
    assert '{"artifact_names":["paris-forecast.md"],' in result.stdout
    # The contents reached the model's next request (and only the request, not the log).
    assert "The report I loaded says: Dry all week; highs of 24°C." in result.stdout
    exported = invoke("export", _session(db), "--db", str(db)).stdout
    assert "Artifact paris-forecast.md (version" not in exported


def test_demo_resumes_a_crashed_idempotent_call_that_pending_says_will_rerun(db: Path) -> None:
    from _cli_support import make_session

    from eventstore import Content, Event, Part
    from runtime.cli._demo import DEMO_APP, DEMO_USER, QUESTION
    from runtime.cli._demo_agent import AGENT, script

    first = script()[0]
    assert not callable(first)
    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text=QUESTION),))),
        Event(author=AGENT, turn_complete=True, content=first.content()),
        Event(author=AGENT, started_call_ids=("call-paris", "call-atlantis")),  # then a crash
    ], session_id="demo-crashed", app_name=DEMO_APP, user_id=DEMO_USER)
    report = orjson.loads(invoke("pending", "demo-crashed", "--db", str(db), "--json").stdout)
    assert [p["kind"] for p in report["pending"]] == ["will_rerun", "will_rerun"]
    assert report["next_run"]["executes"] == ["call-paris", "call-atlantis"]
    resumed = invoke("demo", "--db", str(db), "--resume", "demo-crashed", "--approve")
    assert resumed.exit_code == 0, resumed.stderr
    assert "Done: session demo-crashed is complete" in resumed.stdout


def test_demo_final_answer_follows_the_human_answer(tmp_path: Path) -> None:
    """Approved: the answer gives the week's forecast and quotes the report. Rejected: it says
    the forecast was declined and claims nothing from it."""
    approved_db, rejected_db = tmp_path / "approved.db", tmp_path / "rejected.db"
    assert invoke("demo", "--approve", "--db", str(approved_db)).exit_code == 0
    approved = orjson.loads(invoke("show", _session(approved_db), "--db", str(approved_db),
                                   "--json").stdout)["events"][-1]["text"]
    assert "the 7-day forecast stays dry" in approved
    assert "The report I loaded says" in approved

    assert invoke("demo", "--db", str(rejected_db)).exit_code == 0
    sid = _session(rejected_db)
    [pending] = orjson.loads(invoke("pending", sid, "--db", str(rejected_db),
                                    "--json").stdout)["pending"]
    rejected = invoke("confirm", sid, pending["confirmation_id"], "--no", "--db",
                      str(rejected_db))
    assert rejected.exit_code == 0, rejected.stderr
    assert invoke("demo", "--db", str(rejected_db), "--resume", sid).exit_code == 0
    answer = orjson.loads(invoke("show", sid, "--db", str(rejected_db),
                                 "--json").stdout)["events"][-1]["text"]
    assert "you declined the paid 7-day forecast" in answer
    assert "stays dry" not in answer
    assert "The report I loaded says" not in answer


def test_demo_resume_picks_the_session_by_app_and_user(db: Path) -> None:
    paused = invoke("demo", "--db", str(db), "--json")
    assert paused.exit_code == 0, paused.stderr
    sid = orjson.loads(paused.stdout)["session_id"]
    # Another app's session and another demo user's session take the same id.
    make_session(str(db), [], session_id=sid, app_name="weather", user_id="ada")
    make_session(str(db), [], session_id=sid, app_name="weather-demo", user_id="eve")

    refused = invoke("demo", "--db", str(db), "--resume", sid)
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert f"Session id {sid!r} is held by 3 sessions" in refused.stderr
    assert "--app weather-demo --user demo-user" in refused.stderr

    # The printed commands name the session, so each runs as printed.
    again = invoke("demo", "--db", str(db), "--resume", sid, "--app", "weather-demo",
                   "--user", "demo-user", "--json")
    assert again.exit_code == 0, again.stderr
    summary = orjson.loads(again.stdout)
    assert summary["status"] == "paused_for_confirmation"
    assert "--app weather-demo --user demo-user --resume" in summary["next_command"]

    done = invoke("demo", "--db", str(db), "--resume", sid, "--approve", "--app",
                  "weather-demo", "--user", "demo-user")
    assert done.exit_code == 0, done.stderr
    assert f"Done: session {sid} is complete" in done.stdout
    assert f"show --db {db} --app weather-demo --user demo-user {sid}" in done.stdout
    for app, user in (("weather", "ada"), ("weather-demo", "eve")):
        shown = invoke("show", sid, "--app", app, "--user", user, "--db", str(db), "--json")
        assert orjson.loads(shown.stdout)["events"] == [], (app, user)
    # The other demo user's session has no question: resuming it says so.
    empty = invoke("demo", "--db", str(db), "--resume", sid, "--user", "eve")
    assert empty.exit_code == 1
    assert "has no user message" in empty.stderr


def test_demo_app_and_user_need_resume(db: Path) -> None:
    result = invoke("demo", "--db", str(db), "--user", "eve")
    assert result.exit_code == 2
    assert "--resume" in result.stderr
    assert not db.exists()
