"""``evs demo``: the real runtime on a SQLite file, paused on a confirmation and finished."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import orjson
from _cli_support import evs_subprocess, invoke


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


def test_demo_json_lines(db: Path) -> None:
    result = invoke("demo", "--approve", "--json", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1] == {"status": "completed"}
    assert [e["seq"] for e in lines[:-1]] == list(range(1, len(lines)))


def test_demo_resume_refuses_other_sessions(paused_db: Path) -> None:
    result = invoke("demo", "--db", str(paused_db), "--resume", "s1")
    assert result.exit_code == 1
    assert "is not a demo session" in result.stderr


def test_demo_on_the_default_database(tmp_path: Path) -> None:
    result = evs_subprocess("demo", "--approve", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "evs.db").is_file()
    assert "Done: session demo-" in result.stdout
    assert "evs show demo-" in result.stdout


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
