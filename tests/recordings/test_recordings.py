"""The frozen recordings corpus: today's code still replays old histories and reads old files.

``tests/recordings/`` was written once by ``_record.py`` with the code of that day (the commit is
in ``MANIFEST.json``): ``evs export`` files of the demo's sessions (approved, rejected, paused,
crashed and resumed) and of an agent-as-tool parent and child, and the SQLite file that held
them, at that day's schema revision. Never regenerate them; add new recordings when a format
changes. Every recording must replay without divergence, and a copy of the database file must
upgrade in place and read back exactly what the exports hold.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _recording_agents import booker_agent, demo_agent, demo_processors, planner_agent

from eventstore import open_store
from eventstore._migrate import head_revision
from eventstore.commands._exchange import parse_export
from runtime.testing import load_recording, replay_recording

HERE = Path(__file__).resolve().parent
MANIFEST: dict[str, Any] = json.loads((HERE / "MANIFEST.json").read_text())
RECORDINGS = sorted(MANIFEST["sessions"])

def _has_artifacts(name: str) -> bool:
    header = json.loads((HERE / f"{name}.jsonl").read_bytes().splitlines()[0])
    return bool(header.get("artifacts"))


_NEWER_KINDS = frozenset({"compaction"})
"""Event kinds that did not exist when the corpus was recorded."""


def test_recordings_cover_every_event_kind() -> None:
    conn = sqlite3.connect(f"file:{HERE / MANIFEST['database']}?mode=ro", uri=True)
    try:
        kinds = {row[0] for row in conn.execute("SELECT DISTINCT kind FROM evs_events")}
        artifacts = conn.execute("SELECT count(*) FROM evs_artifacts").fetchone()[0]
    finally:
        conn.close()
    from eventstore._codec import EventKind

    # The corpus is frozen: kinds added after it was recorded are tested where they were made
    # (compaction: tests/runtime/replay/test_replay_compaction.py and its neighbours).
    assert kinds == EventKind.ALL - _NEWER_KINDS
    assert artifacts > 0
    assert {p.stem for p in HERE.glob("*.jsonl")} == set(RECORDINGS)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, id=n) for n in RECORDINGS],
)
async def test_recording_replays_without_divergence(name: str) -> None:
    recording = load_recording(HERE / f"{name}.jsonl")
    assert recording.session_id == MANIFEST["sessions"][name]
    if name.startswith("demo-"):
        result = await replay_recording(
            recording, agent=demo_agent(), request_processors=demo_processors()
        )
    elif name == "trip-parent":
        async with await open_store("memory://") as store:
            result = await replay_recording(recording, agent=planner_agent(store), store=store)
    else:
        result = await replay_recording(recording, agent=booker_agent())
    assert len(result.events) == len(recording.events)


async def test_database_upgrades_in_place_and_reads_back_identically(tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copyfile(HERE / MANIFEST["database"], db)
    exports = {
        name: parse_export((HERE / f"{name}.jsonl").read_bytes().splitlines())
        for name in MANIFEST["sessions"]
    }
    expected_state = await _folded(list(exports.values()))
    async with await open_store(db, auto_upgrade=True) as store:
        for name, session_id in MANIFEST["sessions"].items():
            export = exports[name]
            info = await store.session_info(session_id)
            assert (info.app_name, info.user_id) == (export.app_name, export.user_id)
            events = await store.read(session_id)
            assert [e.id for e in events] == [e.id for e in export.events]
            assert [(e.seq, dataclass_without_seq(e)) for e in events] == [
                (seq, dataclass_without_seq(e)) for seq, e in enumerate(export.events, 1)
            ], name
            for artifact in export.artifacts:
                loaded = await store.load_artifact(
                    session_id, artifact.filename, version=artifact.version
                )
                assert (loaded.data, loaded.mime_type) == (artifact.data, artifact.mime_type)
            assert await store.state(session_id) == expected_state[session_id], name
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == (
            head_revision()
        )
    finally:
        conn.close()


def dataclass_without_seq(event: Any) -> Any:
    import dataclasses

    return dataclasses.replace(event, seq=None)


async def _folded(exports: list[Any]) -> dict[str, dict[str, Any]]:
    """Each session's state at head, computed by a memory store from the exports alone (in
    the order the sessions were written, so ``user:``/``app:`` keys fold the same way)."""
    async with await open_store("memory://") as store:
        for export in exports:
            await store.create_session(
                app_name=export.app_name, user_id=export.user_id, session_id=export.session_id
            )
            if export.events:
                await store.append(export.session_id,
                                   [dataclass_without_seq(e) for e in export.events],
                                   expected_version=0)
        return {e.session_id: await store.state(e.session_id) for e in exports}
