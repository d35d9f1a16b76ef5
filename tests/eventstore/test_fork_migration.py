"""The fork-links revision (``*_session_forks.py``) up and down on populated SQLite and
PostgreSQL databases: sessions, events and artifacts stay; the links go and come back empty;
forking works again after the round trip."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _evs_support import call_event, delta_event, response_event, text_event
from alembic import command
from alembic.script import ScriptDirectory

from eventstore import EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow


def _fork_revision() -> tuple[str, str]:
    """``(revision, down_revision)`` of the fork-links revision, whatever its number."""
    scripts = ScriptDirectory.from_config(_config())  # type: ignore[arg-type]
    for rev in scripts.walk_revisions():
        if rev.path.endswith("_session_forks.py"):
            assert isinstance(rev.down_revision, str)
            return rev.revision, rev.down_revision
    raise AssertionError("no *_session_forks.py revision")


async def _populate(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="o")
    await store.save_artifact("o", "a.txt", b"a", mime_type="text/plain")
    await store.append("o", [text_event("hi"), delta_event({"k": 1, "user:p": 1}),
                             call_event("c1"), response_event("c1")], expected_version=0)
    await store.fork("o", at=2, new_session_id="f")
    await store.fork("o", at=4, new_session_id="g")


async def _round_trip(url: str) -> None:
    _, down = _fork_revision()
    store = await open_store(url, auto_upgrade=True)
    try:
        await _populate(store)
        events = {sid: await store.read(sid) for sid in ("o", "f", "g")}
        states = {sid: await store.state(sid) for sid in ("o", "f", "g")}
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), down)
    assert await current_revision(url) == down
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    store = await open_store(url)
    try:
        for sid in ("o", "f", "g"):
            assert await store.read(sid) == events[sid]
            assert await store.state(sid) == states[sid]
            assert (await store.fork_links(sid)).origin is None
        assert (await store.fork_links("o")).forks == []
        await store.fork("o", at=4, new_session_id="h")
        assert [f.session_id for f in (await store.fork_links("o")).forks] == ["h"]
    finally:
        await store.aclose()


async def test_fork_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    await _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'forks.db'}")


@pytest.mark.postgres
async def test_fork_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    await _round_trip(empty_postgres_url)
