"""``EventStore.save_cache`` / ``load_cache``: a named cache of derived state per session, on
memory, SQLite and PostgreSQL — replaced by the next save, gone with the session, dropped by
``rebuild_snapshots``, not copied by a fork, not kept by a read-only store."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventstore import Event, EventStore, StoreUsageError, open_store


async def test_save_load_replace_and_names_are_separate(store: EventStore) -> None:
    await store.create_session(app_name="a", user_id="u", session_id="s")
    assert await store.load_cache("s", "one") is None
    await store.save_cache("s", "one", 0, b"first")
    await store.save_cache("s", "two", 3, b"")
    assert await store.load_cache("s", "one") == (0, b"first")
    await store.save_cache("s", "one", 5, b"\x00second")
    assert await store.load_cache("s", "one") == (5, b"\x00second")
    assert await store.load_cache("s", "two") == (3, b"")


async def test_nothing_is_kept_for_a_missing_session_and_it_goes_with_its_session(
    store: EventStore,
) -> None:
    await store.save_cache("nobody", "c", 1, b"x")
    assert await store.load_cache("nobody", "c") is None
    await store.create_session(app_name="a", user_id="u", session_id="s")
    await store.save_cache("s", "c", 0, b"x")
    await store.delete_session("s")
    await store.create_session(app_name="a", user_id="u", session_id="s")
    assert await store.load_cache("s", "c") is None


async def test_rebuild_snapshots_drops_caches_and_forks_do_not_copy_them(
    store: EventStore,
) -> None:
    await store.create_session(app_name="a", user_id="u", session_id="s")
    await store.append("s", [Event(author="user"), Event(author="user")], expected_version=0)
    await store.save_cache("s", "c", 2, b"x")
    fork = await store.fork("s", at=2, new_session_id="f")
    assert await store.load_cache(fork.id, "c") is None
    assert await store.rebuild_snapshots() >= 1
    assert await store.load_cache("s", "c") is None


@pytest.mark.parametrize(("args", "what"), [
    (("s", "", 0, b""), "cache name"),
    (("s", "x" * 256, 0, b""), "cache name"),
    (("s", "a\0b", 0, b""), "cache name"),
    (("s", 3, 0, b""), "cache name"),
    (("s", "c", -1, b""), "seq"),
    (("s", "c", True, b""), "seq"),
    (("s", "c", 1 << 31, b""), "seq"),
    (("s", "c", 0, "text"), "data must be bytes"),
    ((7, "c", 0, b""), "session_id"),
])
async def test_bad_arguments_are_named(store: EventStore, args: tuple, what: str) -> None:
    await store.create_session(app_name="a", user_id="u", session_id="s")
    with pytest.raises(StoreUsageError, match=what):
        await store.save_cache(*args)
    assert await store.load_cache("s", "c") is None
    with pytest.raises(StoreUsageError, match="cache name"):
        await store.load_cache("s", "")


async def test_a_read_only_store_keeps_none(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer = await open_store(path, auto_upgrade=True)
    await writer.create_session(app_name="a", user_id="u", session_id="s")
    await writer.save_cache("s", "c", 0, b"kept")
    await writer.aclose()
    reader = await open_store(path, read_only=True)
    await reader.save_cache("s", "c", 0, b"not kept")
    assert await reader.load_cache("s", "c") == (0, b"kept")
    await reader.aclose()
