"""The columns the ``user:``/``app:`` fold selects and orders by are checked by ``evs verify``.

An event row's ``app_name``/``user_id`` decide whose shared state its delta changes, and its
``position`` the order of the fold; the hash chain covers neither. Before, editing them with
raw SQL moved a user's preference to another user (or reordered two of its changes) and verify
said nothing, keyed or not. Now it names the seq: ``scope_edited``, ``shared_order_edited``.
Since revision 0015 the fold reads the scopes' own streams, so these edits no longer change
the state read back; verify still names them (and the stream's entry that disagrees).
"""

from __future__ import annotations

import pytest
from _evs_support import BackendTarget, delta_event
from _tamper import raw

from eventstore import open_store
from eventstore.commands._maintain import verify_session

KEY = b"k" * 32
KEYED = [pytest.param(None, id="unkeyed"), pytest.param(KEY, id="keyed")]


async def _shared_log(target: BackendTarget, key: bytes | None) -> None:
    async with await open_store(target.url, auto_upgrade=True, signing_key=key) as store:
        await store.create_session(app_name="app", user_id="ada", session_id="s")
        await store.append("s", delta_event({"user:theme": "dark"}, id="e1"),
                           expected_version=0)
        await store.append("s", delta_event({"note": "x"}, id="e2"), expected_version=1)
        await store.append("s", delta_event({"user:theme": "light"}, id="e3"),
                           expected_version=2)


async def _findings(target: BackendTarget, key: bytes | None) -> list[tuple[int | None, str]]:
    async with await open_store(target.url, signing_key=key) as store:
        return [(f.seq, f.code) for f in await verify_session(store, "s")]


@pytest.mark.parametrize("key", KEYED)
async def test_an_untouched_shared_log_verifies(sql_target: BackendTarget,
                                                key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    assert await _findings(sql_target, key) == []


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize("column", ["user_id", "app_name"])
async def test_a_row_moved_to_another_scope_is_named(
    sql_target: BackendTarget, key: bytes | None, column: str
) -> None:
    await _shared_log(sql_target, key)
    await raw(sql_target, f"UPDATE evs_events SET {column} = ? WHERE session_id = ? AND seq = ?",
              "mallory", "s", 3)
    async with await open_store(sql_target.url, signing_key=key) as store:
        # The fold reads ada's stream, which the edit did not touch.
        state = await store.shared_state(app_name="app", user_id="ada")
        assert state.get("user:theme") == "light"
    assert (3, "scope_edited") in await _findings(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
async def test_swapped_shared_positions_are_named(sql_target: BackendTarget,
                                                  key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    rows = await raw(sql_target, "SELECT seq, position FROM evs_events WHERE session_id = ? "
                     "AND seq IN (1, 3) ORDER BY seq", "s")
    (_, first), (_, third) = rows
    swap = "UPDATE evs_events SET position = ? WHERE session_id = ? AND seq = ?"
    await raw(sql_target, swap, -1, "s", 1)  # the pair is unique per app: via a free value
    await raw(sql_target, swap, first, "s", 3)
    await raw(sql_target, swap, third, "s", 1)
    async with await open_store(sql_target.url, signing_key=key) as store:
        await store.rebuild_snapshots()
        state = await store.shared_state(app_name="app", user_id="ada")
        assert state.get("user:theme") == "light"  # the stream's order decides, not positions
    findings = await _findings(sql_target, key)
    assert (3, "shared_order_edited") in findings
    assert (1, "stream_origin_mismatch") in findings  # the entry keeps the position it had
