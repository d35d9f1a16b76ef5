"""Helpers of the web UI tests: run ``evs`` as a user does, find the demo's session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson


def evs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``evs`` in a subprocess (bounded), as a user would."""
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def only_session(db: Path) -> str:
    """The id of the only session of ``db``."""
    done = evs("sessions", "--db", str(db), "--json")
    [session] = orjson.loads(done.stdout)["sessions"]
    return str(session["id"])
