"""A store opened without the key on a keyed database reads but never writes.

Before, ``evs confirm`` without ``EVS_SIGNING_KEY`` appended an unsigned answer to a keyed
session and said the agent would act on it; the keyed runner then paused on that unsigned
event for good. Now every write of such a store is refused with a StoreUsageError naming the
variable, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _evs_support import BackendTarget, full_dump, text_event

from eventstore import Artifact, EventStore, StoreUsageError, open_store

KEY = b"k" * 32

Write = Callable[[EventStore], Awaitable[Any]]

WRITES: list[Any] = [
    pytest.param(lambda s: s.append("s", text_event("x", id="e9"), expected_version=2),
                 id="append"),
    pytest.param(lambda s: s.create_session(app_name="app", user_id="u", session_id="t"),
                 id="create_session"),
    pytest.param(lambda s: s.fork("s", at=1, new_session_id="f"), id="fork"),
    pytest.param(lambda s: s.delete_session("s"), id="delete_session"),
    pytest.param(lambda s: s.save_artifact("s", "a.txt", b"x", mime_type="text/plain"),
                 id="save_artifact"),
    pytest.param(lambda s: s.delete_artifact("s", "a.txt"), id="delete_artifact"),
]


async def _keyed_database(url: str) -> None:
    async with await open_store(url, signing_key=KEY, auto_upgrade=True) as store:
        await store.create_session(app_name="app", user_id="u", session_id="s",
                                   events=[text_event("one", id="e1")],
                                   artifacts=[Artifact(filename="a.txt", version=0, data=b"v0",
                                                       mime_type="text/plain", created_at=1.0)])
        await store.append("s", text_event("two", id="e2"), expected_version=1)


@pytest.mark.parametrize("write", WRITES)
async def test_an_unkeyed_store_refuses_to_write_to_a_keyed_database(
    sql_target: BackendTarget, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVS_SIGNING_KEY", raising=False)
    await _keyed_database(sql_target.url)
    async with await open_store(sql_target.url) as keyless:
        before = await full_dump(keyless)
        with pytest.raises(StoreUsageError, match="EVS_SIGNING_KEY"):
            await write(keyless)
        # It still reads everything.
        assert [e.id for e in await keyless.read("s")] == ["e1", "e2"]
        assert await full_dump(keyless) == before
    async with await open_store(sql_target.url, signing_key=KEY) as keyed:
        assert await keyed.untrusted("s") == {}
        # With the key the same write goes through.
        await write(keyed)


async def test_an_unkeyed_database_stays_writable_without_a_key(
    sql_target: BackendTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVS_SIGNING_KEY", raising=False)
    async with await open_store(sql_target.url, auto_upgrade=True) as store:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        await store.append("s", text_event("x", id="e1"), expected_version=0)
    async with await open_store(sql_target.url) as again:
        await again.append("s", text_event("y", id="e2"), expected_version=1)
        assert [e.id for e in await again.read("s")] == ["e1", "e2"]


async def test_the_key_from_the_environment_counts(
    sql_target: BackendTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVS_SIGNING_KEY", raising=False)
    await _keyed_database(sql_target.url)
    monkeypatch.setenv("EVS_SIGNING_KEY", KEY.decode())
    async with await open_store(sql_target.url) as store:
        await store.append("s", text_event("three", id="e3"), expected_version=2)
        assert await store.untrusted("s") == {}
