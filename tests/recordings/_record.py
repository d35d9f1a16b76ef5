"""Write the frozen recordings corpus with the code of the day it runs (run once; never again).

    .venv/bin/python tests/recordings/_record.py tests/recordings

Creates ``sessions-0003.db`` (a SQLite file at the schema revision of the day) holding every
session below, and one ``evs export`` file per session. Refuses to overwrite anything: the corpus
is history; when the format changes, add new recordings next to these instead.

Sessions (together they hold every event kind: message, function call and response,
confirmation request and answer, state delta, execution started, artifacts):
- ``demo-approved``: ``evs demo --approve`` (parallel calls, a structured error, a paid call
  confirmed, a long-running call answered later, an artifact saved and loaded);
- ``demo-rejected``: ``evs demo``, then ``evs confirm … --no``, then ``evs demo --resume``;
- ``demo-paused``: ``evs demo`` left waiting for its confirmation;
- ``demo-crashed``: the demo process stops right after the model's first turn is appended
  (before the tools' claim; the log a SIGKILL at that point leaves), then a fresh runner resumes
  the session from the log and ``evs demo --resume --approve`` finishes it;
- ``trip-parent`` / ``trip-child``: an agent-as-tool run (the parent starts with initial state,
  which the child inherits; the child's session is linked to the parent's call). A child whose
  confirmation surfaces in the parent is not recorded: the parent's event carries the child's
  random confirmation id, which no replay can reproduce.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from _recording_agents import TRIP_APP, TRIP_USER, planner_agent  # noqa: E402

from eventstore import open_store  # noqa: E402
from runtime import ReplayResumePlanner, Runner  # noqa: E402
from runtime.cli._demo import DEMO_APP, QUESTION  # noqa: E402
from runtime.cli._demo_agent import demo_runner  # noqa: E402
from runtime.replay import child_session_id, pending  # noqa: E402

EVS = str(Path(sys.executable).with_name("evs"))


def evs(db: Path, *args: str) -> str:
    done = subprocess.run([EVS, *args, "--db", str(db)], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    return done.stdout


async def session_ids(db: Path) -> set[str]:
    async with await open_store(db) as store:
        page = await store.list_sessions(limit=1000)
        return {s.id for s in page.sessions}


def new_demo(db: Path, *args: str) -> str:
    before = asyncio.run(session_ids(db)) if db.exists() else set()
    evs(db, "demo", *args)
    (sid,) = asyncio.run(session_ids(db)) - before
    return sid


async def crashed_demo(db: Path) -> str:
    sid = "demo-crashed"
    async with await open_store(db) as store:
        await store.create_session(app_name=DEMO_APP, user_id="demo-user", session_id=sid)
        runner = demo_runner(store, [], app_name=DEMO_APP)
        events = runner.run_events(session_id=sid, user_id="demo-user", new_message=QUESTION)
        async for event in events:
            if event.author == runner.agent.name:
                break  # the process dies here: the model's turn is stored, nothing after it
        await events.aclose()
        seen = await store.read(sid)
        resumed = demo_runner(store, seen, app_name=DEMO_APP)
        await resumed.run(session_id=sid, user_id="demo-user")
    return sid


async def trip(db: Path) -> tuple[str, str]:
    sid = "trip-parent"
    async with await open_store(db) as store:
        runner = Runner(agent=planner_agent(store), store=store, app_name=TRIP_APP,
                        resume_planner=ReplayResumePlanner())
        await runner.create_session(user_id=TRIP_USER, session_id=sid,
                                    state={"units": "metric", "user:home": "Lisbon"})
        done = await runner.run(session_id=sid, user_id=TRIP_USER,
                                new_message="Book me a hotel in Kyoto")
        assert done.status == "completed", done.status
    return sid, child_session_id(sid, "p-book")


async def confirmation_id(db: Path, sid: str) -> str:
    async with await open_store(db) as store:
        report = pending(await store.read(sid))
    (item,) = report.confirmations
    assert item.confirmation_id is not None
    return item.confirmation_id


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "sessions-0003.db"
    if db.exists() or any(out.glob("*.jsonl")):
        raise SystemExit(f"{out} already holds recordings; they are frozen. Add new ones instead.")
    names: dict[str, str] = {}
    names["demo-approved"] = new_demo(db, "--approve")
    names["demo-paused"] = new_demo(db)
    rejected = new_demo(db)
    evs(db, "confirm", rejected, asyncio.run(confirmation_id(db, rejected)), "--no")
    evs(db, "demo", "--resume", rejected)
    names["demo-rejected"] = rejected
    names["demo-crashed"] = asyncio.run(crashed_demo(db))
    evs(db, "demo", "--resume", names["demo-crashed"], "--approve")
    names["trip-parent"], names["trip-child"] = asyncio.run(trip(db))
    for name, sid in names.items():
        evs(db, "export", sid, "-o", str(out / f"{name}.jsonl"))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
    revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    conn.close()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    (out / "MANIFEST.json").write_text(json.dumps(
        {"written_by_commit": commit, "database": db.name, "revision": revision,
         "sessions": names}, indent=2) + "\n")
    for leftover in out.glob("sessions-0003.db-*"):
        os.remove(leftover)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
