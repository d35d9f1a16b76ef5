"""Crash safety of the SQLite file: a writer killed with SIGKILL at random moments, many times.

After every kill the file passes ``PRAGMA integrity_check``, every batch the writer acknowledged
is stored, every batch is wholly present or wholly absent, and seq stays 1..N without a gap.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
from _evs_support import StoreFactory, backend_module_exists, kill_after_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not backend_module_exists("eventstore.backends.sqlite.base"), reason="no SQLite backend yet"
    ),
]

CHILD = Path(__file__).with_name("_evs_child.py")
KILLS = 18
MIN_KILLS = 10
BATCH = 4
TIME_BUDGET = 40.0
"""Past it the loop stops after ``MIN_KILLS`` kills (a loaded machine starts writers slowly)."""


def _integrity(path: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


async def _run_and_kill(url: str, sid: str, prefix: str, delay: float) -> list[str]:
    """Start a writer, let it append for ``delay`` seconds, SIGKILL it; return the acked batches."""
    out = await kill_after_ready([str(CHILD), "crash", url, sid, prefix, str(BATCH)], delay)
    return out.split()


@pytest.mark.parametrize("sql_target", [pytest.param("sqlite", id="sqlite")], indirect=True)
async def test_crash_sigkill_never_loses_acknowledged_or_tears_batches(
    sql_factory: StoreFactory,
) -> None:
    rng = random.Random(20240601)
    url = sql_factory.url
    path = url.split(":///", 1)[1]
    setup = await sql_factory()
    await setup.create_session(app_name="app", user_id="u", session_id="crashy")
    await setup.aclose()

    acked: set[str] = set()
    started = time.monotonic()
    kills = 0
    while kills < KILLS and (kills < MIN_KILLS or time.monotonic() - started < TIME_BUDGET):
        delay = rng.choice([0.0, 0.001, 0.01]) + rng.random() * 0.25
        acked.update(await _run_and_kill(url, "crashy", f"k{kills}", delay))
        kills += 1

        assert _integrity(path) == "ok", f"integrity check failed after kill {kills}"
        store = await sql_factory()
        try:
            events = await store.read("crashy")
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            sizes = Counter(e.custom_metadata["batch"] for e in events)
            torn = {tag: n for tag, n in sizes.items() if n != BATCH}
            assert not torn, f"batches stored in part after kill {kills}: {torn}"
            missing = acked - set(sizes)
            assert not missing, f"acknowledged batches lost after kill {kills}: {missing}"
            assert len({e.id for e in events}) == len(events)
        finally:
            await store.aclose()

    assert acked, "the writer never acknowledged a batch"
