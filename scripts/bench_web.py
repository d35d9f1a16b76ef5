"""Benchmark ``evs web`` on a 100,000-event session on SQLite: timeline pages, event pages, the
sessions list.

    flock /tmp/bench.lock .venv/bin/python scripts/bench_web.py [--events N] [--sessions N]
        [--runs N]

Builds a session of the realistic agent events of ``_bench_events`` in a temporary SQLite
file — its first half with a state snapshot every 200 events, as running it leaves them (each
invocation reads the state at head, which saves a snapshot once 200 events passed since the
last); its second half without any, as a bulk import leaves it — and ``--sessions`` small
sessions besides, then times GET requests through the real ASGI app (httpx over ASGI, no
network):

- ``newest page``: ``/s/ID`` (the default view: the newest 50 events, paired within the window
  around them);
- ``first page``: ``/s/ID?from=start``;
- ``filtered``: ``/s/ID?tool=get_weather`` (the first 50 matches, at most 5,000 rows scanned);
- ``event, snapshot near``: ``/e/SEQ/ID`` at a quarter (the event, the state before and after it
  folded from the snapshot below, what it changed);
- ``event, no snapshot``: ``/e/SEQ/ID`` at three quarters (the event and its own changes: the
  state is not folded, the page offers to);
- ``event, fold asked``: the same with ``?fold=1`` (two folds of 25,000 events from the snapshot
  at the half: what an event page cost before it was bounded, that far from a snapshot);
- ``sessions``: ``/`` (the newest 50 sessions of all), and ``sessions, id text``: ``/?q=7``.

Median and spread of ``--runs`` runs (7 by default); the goal is under 0.2 s for a page.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _bench_events import realistic_event

from eventstore import open_store
from runtime.web import WebConfig, create_app

SESSION = "bench-web"


async def _build(db: str, count: int, sessions: int) -> None:
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name="bench", user_id="u", session_id=SESSION)
        for lo in range(0, count, 200):
            batch = [realistic_event(i) for i in range(lo, min(lo + 200, count))]
            await store.append(SESSION, batch, expected_version=lo)
            if lo + 200 <= count // 2:
                await store.state(SESSION)  # leaves a snapshot at head
        for n in range(sessions):
            sid = f"small-{n:06d}"
            await store.create_session(app_name=f"app{n % 5}", user_id=f"user{n % 50}",
                                       session_id=sid)
            await store.append(sid, [realistic_event(n)], expected_version=0)


async def _measure(db: str, count: int, runs: int) -> dict[str, list[float]]:
    app = create_app(WebConfig(db=db))
    paths = {
        "newest page": f"/s/{SESSION}",
        "first page": f"/s/{SESSION}?from=start",
        "filtered": f"/s/{SESSION}?tool=get_weather",
        "event, snapshot near": f"/e/{count // 4 + 150}/{SESSION}",
        "event, no snapshot": f"/e/{3 * count // 4}/{SESSION}",
        "event, fold asked": f"/e/{3 * count // 4}/{SESSION}?fold=1",
        "sessions": "/",
        "sessions, id text": "/?q=7",
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for _ in range(runs):
                for name, path in paths.items():
                    start = time.perf_counter()
                    response = await http.get(path)
                    times[name].append(time.perf_counter() - start)
                    if response.status_code != 200:
                        raise SystemExit(f"{path}: HTTP {response.status_code}")
                    if name.startswith("event") and ('id="unfolded"' in response.text) != (
                            name == "event, no snapshot"):
                        raise SystemExit(f"{path}: the state was (not) folded, unexpectedly")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "bench.db")
        started = time.perf_counter()
        asyncio.run(_build(db, args.events, args.sessions))
        took = time.perf_counter() - started
        print(f"built {args.events} events and {args.sessions} sessions in {took:.1f} s")
        times = asyncio.run(_measure(db, args.events, args.runs))
    for name, values in times.items():
        print(f"{name:22} median {statistics.median(values) * 1000:7.1f} ms   "
              f"min {min(values) * 1000:7.1f}   max {max(values) * 1000:7.1f}")


if __name__ == "__main__":
    main()
