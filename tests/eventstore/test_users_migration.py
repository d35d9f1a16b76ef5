"""Revision 0014 (session ids per (app, user)) up and down on populated SQLite and PostgreSQL
databases: the backfill gives every session its key as its id; down works while every session's
key is its id and refuses, changing nothing, once two users share an id."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _evs_support import call_event, delta_event, response_event, text_event
from alembic import command

from eventstore import EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade

pytestmark = pytest.mark.slow

_REVISION, _DOWN = "0014", "0013"


async def _populate(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="o", state={"k": 0})
    await store.save_artifact("o", "a.txt", b"a", mime_type="text/plain")
    await store.append("o", [text_event("hi"), delta_event({"k": 1, "user:p": 1}),
                             call_event("c1"), response_event("c1")], expected_version=1)
    await store.fork("o", at=3, new_session_id="f")
    await store.create_session(app_name="other", user_id="v", session_id="p")


async def _snapshot(store: EventStore) -> dict[str, object]:
    return {sid: (await store.read(sid), await store.state(sid),
                  await store.list_artifacts(sid), (await store.session_info(sid)).user_id)
            for sid in ("o", "f", "p")}


async def _round_trip(url: str) -> None:
    store = await open_store(url, auto_upgrade=True)
    try:
        await _populate(store)
        before = await _snapshot(store)
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), _DOWN)
    assert await current_revision(url) == _DOWN
    await upgrade(url)  # the backfill: every session's id is its key
    assert await current_revision(url) == head_revision()
    store = await open_store(url)
    try:
        assert await _snapshot(store) == before
        assert (await store.fork_links("f")).origin is not None
        # A second user's "o" now exists beside the first one's.
        await store.create_session(app_name="app", user_id="w", session_id="o")
        await store.append("o", text_event("w's"), expected_version=0, app_name="app",
                           user_id="w")
    finally:
        await store.aclose()
    # Revisions above 0014 go down first (SQLite's DDL is not transactional, so a refusal in a
    # later step of one command would not undo them); then 0014's own step refuses.
    await asyncio.to_thread(command.downgrade, _config(url), _REVISION)
    with pytest.raises(RuntimeError, match=r"Cannot downgrade below revision 0014: 1 session"):
        await asyncio.to_thread(command.downgrade, _config(url), _DOWN)
    assert await current_revision(url) == _REVISION
    await upgrade(url)
    store = await open_store(url)
    try:
        assert await store.version("o", app_name="app", user_id="w") == 1
        assert await store.read("o", app_name="app", user_id="u") == before["o"][0]  # type: ignore[index]
        await store.delete_session("o", app_name="app", user_id="w")
    finally:
        await store.aclose()
    # With every session under its own id again, the downgrade goes through.
    await asyncio.to_thread(command.downgrade, _config(url), _DOWN)
    assert await current_revision(url) == _DOWN
    await upgrade(url)
    store = await open_store(url)
    try:
        assert await _snapshot(store) == before
    finally:
        await store.aclose()


async def test_users_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    await _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'users.db'}")


@pytest.mark.postgres
async def test_users_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    await _round_trip(empty_postgres_url)
