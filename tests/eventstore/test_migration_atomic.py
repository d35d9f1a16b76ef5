"""An upgrade commits whole or not at all: one that fails (or is killed) midway leaves a
database the next upgrade opens, never tables without their schema revision.

Found by scripts/crash_anywhere.py: a process SIGKILLed during its first
``open_store(auto_upgrade=True)`` left a SQLite file that every later open refused as
"agent-eventstore tables but no schema revision".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.runtime.migration import HeadMaintainer

from eventstore import open_store
from eventstore._migrate import current_revision, head_revision

# The real migrations, not the per-process copy of a migrated file (tests/_fresh_sqlite.py).
pytestmark = pytest.mark.real_migrations


class _Failed(Exception):
    pass


async def _fail_midway(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    steps: list[object] = []
    real = HeadMaintainer.update_to_step

    def update_to_step(self: HeadMaintainer, step: object) -> None:
        steps.append(step)
        if len(steps) == 3:  # after three revisions' DDL, as a crash midway would land
            raise _Failed
        real(self, step)  # type: ignore[arg-type]

    monkeypatch.setattr(HeadMaintainer, "update_to_step", update_to_step)
    with pytest.raises(_Failed):
        async with await open_store(url, auto_upgrade=True):
            pass
    monkeypatch.setattr(HeadMaintainer, "update_to_step", real)


async def test_migration_atomic_sqlite_failed_first_upgrade_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "fresh.db")
    await _fail_midway(monkeypatch, url)
    assert await current_revision(f"sqlite+aiosqlite:///{url}") is None
    async with await open_store(url, auto_upgrade=True) as store:
        session = await store.create_session(app_name="a", user_id="u")
        assert session.version >= 0
    assert await current_revision(f"sqlite+aiosqlite:///{url}") == head_revision()


@pytest.mark.postgres
async def test_migration_atomic_postgres_failed_first_upgrade_leaves_nothing(
    empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _fail_midway(monkeypatch, empty_postgres_url)
    assert await current_revision(empty_postgres_url) is None
    async with await open_store(empty_postgres_url, auto_upgrade=True) as store:
        await store.create_session(app_name="a", user_id="u")
    assert await current_revision(empty_postgres_url) == head_revision()


@pytest.mark.slow
def test_migration_atomic_sqlite_killed_first_open_then_opens(tmp_path: Path) -> None:
    url = str(tmp_path / "killed.db")
    child = (
        "import asyncio, os, signal\n"
        "from alembic.runtime.migration import HeadMaintainer\n"
        "from eventstore import open_store\n"
        "real = HeadMaintainer.update_to_step\n"
        "seen = []\n"
        "def step(self, s):\n"
        "    seen.append(s)\n"
        "    if len(seen) == 5:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real(self, s)\n"
        "HeadMaintainer.update_to_step = step\n"
        "async def main():\n"
        f"    async with await open_store({url!r}, auto_upgrade=True):\n"
        "        pass\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=os.getcwd(), check=False)
    assert done.returncode == -signal.SIGKILL
    probe = (
        "import asyncio\n"
        "from eventstore import open_store\n"
        "async def main():\n"
        f"    async with await open_store({url!r}, auto_upgrade=True) as store:\n"
        "        await store.create_session(app_name='a', user_id='u')\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=os.getcwd(), check=True)
