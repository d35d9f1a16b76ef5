"""A closed stdout (``evs … | head``) neither loses work nor prints a traceback: a command that
only prints stops, one that writes finishes; both exit with 141 (as SIGPIPE would) and say
nothing on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from _cli_support import REPO, invoke, make_session

from eventstore import Content, Event, Part


def _run_and_close_after(args: list[str], lines: int) -> tuple[int, str]:
    """Start ``python -m runtime.cli ARGS``, read ``lines`` lines of its stdout, then close the
    pipe as ``head`` does; return its exit status and stderr."""
    env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    env.update({"PYTHONPATH": str(REPO), "COLUMNS": "200"})
    process = subprocess.Popen([sys.executable, "-m", "runtime.cli", *args], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stderr is not None
    for _ in range(lines):
        assert process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    return process.wait(timeout=120), err


def test_show_into_a_closed_pipe_exits_141_silently(db: Path) -> None:
    # Far more than a pipe buffer holds, so show is still printing when the reader leaves.
    events = [Event(author="user", content=Content(role="user", parts=(
        Part(text=f"message {n} " + "x" * 100),))) for n in range(1500)]
    make_session(str(db), events)
    code, err = _run_and_close_after(["show", "s1", "--db", str(db)], lines=2)
    assert err == ""
    assert code == 141


def test_demo_into_a_closed_pipe_finishes_the_session(db: Path) -> None:
    code, err = _run_and_close_after(["demo", "--approve", "--db", str(db)], lines=2)
    [info] = orjson.loads(invoke("sessions", "--db", str(db), "--json").stdout)["sessions"]
    shown = orjson.loads(invoke("show", info["id"], "--db", str(db), "--json").stdout)
    assert shown["events"][-1]["text"].startswith("Paris: 22°C")
    assert shown["problems"] == []
    assert "Nothing is pending" in invoke("pending", info["id"], "--db", str(db)).stdout
    assert err == ""
    assert code == 141
