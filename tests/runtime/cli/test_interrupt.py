"""Ctrl-C (SIGINT) at any moment of a real ``evs`` process: one line, status 130, no traceback.

The moments cover Python still importing the command line (the first second or two), the
command opening the database, and ``evs tail`` following the log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli_support import REPO, make_session, paused_weather_log

EVS = Path(sys.executable).parent / "evs"
"""The installed console script (what a user runs), next to this interpreter."""


def _start_tail(db: Path) -> subprocess.Popen[str]:
    assert EVS.is_file(), f"the evs console script is not installed at {EVS}"
    env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    return subprocess.Popen([str(EVS), "tail", "s1", "--db", str(db)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _interrupt(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


@pytest.mark.parametrize("delay", [
    pytest.param(0.3, id="importing"),
    pytest.param(0.8, id="importing-later"),
    pytest.param(1.5, id="starting"),
    pytest.param(3.0, id="opening-or-following"),
])
def test_tail_interrupted_at_any_moment_exits_130_without_traceback(
    paused_db: Path, delay: float
) -> None:
    # Counted from the end of Python's own start-up, before which no program can catch the
    # signal (seconds on a busy machine).
    wait = _bare_start() + delay
    process = _start_tail(paused_db)
    time.sleep(wait)
    assert process.poll() is None, "evs tail ended before it was interrupted"
    code, err = _interrupt(process)
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" not in err, err
    assert code == 130, (code, err)
    assert err.endswith("evs: interrupted.\n"), err


def test_tail_interrupted_while_following_exits_130(db: Path) -> None:
    make_session(str(db), paused_weather_log())
    process = _start_tail(db)
    assert process.stderr is not None
    following = process.stderr.readline()  # printed once the log is being followed
    assert following.startswith("following s1 from seq 9"), following
    time.sleep(0.3)
    code, err = _interrupt(process)
    assert code == 130, (code, err)
    assert err == "evs: interrupted.\n", err


def _bare_start() -> float:
    """Seconds this interpreter takes to start and exit doing nothing: Python's own start-up
    (site packages, ``.pth`` files), which runs before any code of the project can."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def _whole_run(command: list[str], db: Path, env: dict[str, str]) -> float:
    """Seconds ``command sessions`` takes from start to exit, uninterrupted, right now."""
    started = time.perf_counter()
    subprocess.run([*command, "sessions", "--db", str(db)], cwd=REPO, env=env,
                   capture_output=True, check=True, timeout=120)
    return time.perf_counter() - started


@pytest.mark.parametrize("command", [
    pytest.param([sys.executable, "-m", "runtime.cli"], id="python-m-runtime.cli"),
    pytest.param([str(EVS)], id="evs-launcher"),
])
# The moments are fractions of the window from the end of Python's own start-up to the end of
# an uninterrupted run measured just before, so they land in the command's
# imports or its work however fast or loaded the machine is (fixed delays overshot the whole
# run on a fast machine). None under 0.2 s: a SIGINT that close to the bare start-up can land
# while the interpreter itself is still starting (site packages, .pth files), before any code
# of ours is loaded, and what happens then is CPython's (seen: a crash by SIGSEGV on a loaded
# machine), not evs's.
@pytest.mark.parametrize("fraction", [0.2, 0.35, 0.5, 0.6])
def test_interrupted_while_importing_exits_130_without_traceback(
    paused_db: Path, command: list[str], fraction: float
) -> None:
    """SIGINT ``fraction`` of the way through an ``evs sessions`` run, after Python's own
    start-up: while the command line's packages are being imported, or while it works."""
    env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    bare = _bare_start()
    window = _whole_run(command, paused_db, env) - bare
    # Landing after the work (the run was faster than the one measured) says nothing: try
    # once more, half as far in.
    for share in (fraction, fraction / 2):
        wait = bare + max(0.2, share * window)
        process = subprocess.Popen([*command, "sessions", "--db", str(paused_db)], cwd=REPO,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        time.sleep(wait)
        if process.poll() is not None:
            process.communicate()
            continue
        code, err = _interrupt(process)
        assert "Traceback" not in err, err
        assert "KeyboardInterrupt" not in err, err
        if (code, err) == (0, ""):
            continue  # evs had done its work when the interrupt landed (it exited as it was)
        assert code == 130, (code, err)
        assert err.endswith("evs: interrupted.\n"), err
        return
    pytest.skip(f"evs finished its work before the interrupt both times ({wait:.2f} s in)")


@pytest.mark.parametrize("status", [0, 3])
def test_interrupt_after_the_command_is_done_keeps_its_status(status: int) -> None:
    """Ctrl-C landing while the process exits (here: from an exit handler, the last Python code
    to run) neither prints a traceback nor replaces the status the command chose."""
    script = (
        "import atexit, os, signal\n"
        "from _evs_launcher import run_then_exit\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "def command():\n"
        "    print('done', flush=True)\n"
        f"    raise SystemExit({status})\n"
        "run_then_exit(command)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (status, "done\n", "")
