"""``evs show`` of a long session: paged through the user's pager on a terminal only (as
``git log``: ``$PAGER``, ``LESS=FRX`` unless set), lines fitted to the terminal width."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from _cli_support import AGENT, REPO, call, invoke, make_session, response, text

from eventstore import Content, Event


def _long_session(db: Path, turns: int = 30) -> None:
    events = []
    for n in range(turns):
        events += [
            Event(author="user", content=Content(role="user", parts=(
                text(f"question {n}: " + "what is the weather in Paris " * 8),))),
            Event(author=AGENT, content=Content(role="model", parts=(
                call(f"c{n}", "get_weather", city="Paris", detail="more words " * 20),))),
            Event(author=AGENT, content=Content(role="user", parts=(
                response(f"c{n}", "get_weather", temp_c=n, sky="sunny " * 30),))),
        ]
    make_session(str(db), events)


def test_show_fits_lines_to_the_width(db: Path) -> None:
    _long_session(db)
    result = invoke("show", "s1", "--db", str(db), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) > 90
    assert max(len(line) for line in lines) <= 80
    assert "question 29" in result.stdout


def _show_on_a_terminal(db: Path, pager: str, **env: str) -> tuple[int, str]:
    """Run ``evs show s1`` with a pseudo-terminal as stdout; return its status and what
    reached the terminal."""
    primary, secondary = pty.openpty()
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("EVS_DATABASE_URL", "LESS", "EVS_PAGER")}
    full_env.update({"PYTHONPATH": str(REPO), "COLUMNS": "80", "PAGER": pager, **env})
    process = subprocess.Popen([sys.executable, "-m", "runtime.cli", "show", "s1", "--db",
                                str(db)], cwd=REPO, env=full_env, stdout=secondary,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: the process and the pager are done
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    process.wait(timeout=60)
    assert process.stderr is not None
    process.stderr.close()
    return process.returncode, seen.decode("utf-8", "replace")


def test_show_on_a_terminal_goes_through_the_pager(db: Path, tmp_path: Path) -> None:
    _long_session(db)
    paged, less = tmp_path / "paged.txt", tmp_path / "less.txt"
    code, screen = _show_on_a_terminal(
        db, f"printf %s \"$LESS\" > {less}; cat > {paged}")
    assert code == 0
    assert less.read_text() == "FRX"  # as git sets it: quit if one screen, raw colours
    got = paged.read_text()
    assert "question 29" in got
    assert "question 29" not in screen  # all of it went to the pager, none around it


def test_show_keeps_the_users_less_options(db: Path, tmp_path: Path) -> None:
    _long_session(db, turns=1)
    less = tmp_path / "less.txt"
    code, _ = _show_on_a_terminal(db, f"printf %s \"$LESS\" > {less}; cat > /dev/null",
                                  LESS="-S")
    assert code == 0
    assert less.read_text() == "-S"


def test_show_into_a_pipe_never_runs_the_pager(db: Path, tmp_path: Path) -> None:
    _long_session(db, turns=1)
    marker = tmp_path / "ran.txt"
    result = invoke("show", "s1", "--db", str(db), env={"PAGER": f"touch {marker}; cat"})
    assert result.exit_code == 0
    assert "question 0" in result.stdout
    assert not marker.exists()


def test_quitting_the_pager_early_ends_show_cleanly(db: Path) -> None:
    _long_session(db, turns=400)  # far more than a pipe holds
    code, screen = _show_on_a_terminal(db, "head -c 100 > /dev/null")
    assert code == 0
    assert "Traceback" not in screen
