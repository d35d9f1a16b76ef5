"""A fork carries the hash chain: its copies verify (keyed: signed again for the fork), its head
record is the origin's event at the fork's seq, and appending to it extends the chain. The
``shared_state`` flag, which the chain does not cover, is checked against the payload."""

from __future__ import annotations

import pytest
from _evs_support import BackendTarget, delta_event, text_event
from _tamper import raw

from eventstore import EventStore, StoreUsageError, open_store
from eventstore._chain import signature_ok
from eventstore.commands._maintain import verify_session

KEY = b"f" * 32
KEYED = [pytest.param(None, id="unkeyed"), pytest.param(KEY, id="keyed")]


@pytest.mark.parametrize("key", KEYED)
async def test_a_fork_verifies_and_its_chain_goes_on(backend_target: BackendTarget,
                                                     key: bytes | None) -> None:
    store = await open_store(backend_target.url, auto_upgrade=True, signing_key=key)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="o")
        await store.append("o", [text_event("hi", id="e1"),
                                 delta_event({"a": 1, "user:u": 1, "app:x": 1}, id="e2"),
                                 text_event("more", id="e3"),
                                 delta_event({"app:x": 2}, id="e4")], expected_version=0)
        await store.fork("o", at=3, new_session_id="f")
        assert await verify_session(store, "f") == []
        assert await verify_session(store, "o") == []
        head = await store.backend.get_session("f")
        origin_rows = await store.backend.read("o", after=None, upto=None, backwards=False,
                                               limit=None)
        if backend_target.name != "memory":  # the memory backend derives its head
            assert head is not None
            assert (head.head_seq, head.head_hash) == (3, origin_rows[2].chain_hash)
        fork_rows = await store.backend.read("f", after=None, upto=None, backwards=False,
                                             limit=None)
        assert [r.chain_hash for r in fork_rows] == [r.chain_hash for r in origin_rows[:3]]
        if key is not None:
            assert all(signature_ok(key, "f", r.chain_hash, r.signature) for r in fork_rows)
            assert not any(signature_ok(key, "o", r.chain_hash, r.signature) for r in fork_rows)
        else:
            assert all(r.signature is None for r in fork_rows)
        await store.append("f", text_event("other way", id="e4f"), expected_version=3)
        assert await verify_session(store, "f") == []
    finally:
        await store.aclose()


async def test_an_unkeyed_fork_of_a_signed_log_is_unsigned_for_a_keyed_reader(
    sql_target: BackendTarget,
) -> None:
    keyed = await open_store(sql_target.url, auto_upgrade=True, signing_key=KEY)
    try:
        await keyed.create_session(app_name="app", user_id="u", session_id="o")
        await keyed.append("o", [text_event("hi", id="e1"), text_event("yo", id="e2")],
                           expected_version=0)
    finally:
        await keyed.aclose()
    plain = await open_store(sql_target.url)
    try:
        # A store without the key refuses to write to a keyed database (test_keyed_writes) …
        with pytest.raises(StoreUsageError, match="EVS_SIGNING_KEY"):
            await plain.fork("o", at=2, new_session_id="f")
        # … but one built without that check (as releases before it were) writes unsigned
        # copies, and a keyed reader says so.
        older = EventStore(plain.backend)
        await older.fork("o", at=2, new_session_id="f")
    finally:
        await plain.aclose()
    reader = await open_store(sql_target.url, signing_key=KEY)
    try:
        found = [(f.seq, f.code) for f in await verify_session(reader, "f")]
    finally:
        await reader.aclose()
    assert (1, "unsigned") in found
    assert not any(code.startswith("chain_") for _, code in found)


@pytest.mark.parametrize(("session", "seq", "value"), [
    pytest.param("o", 2, False, id="shared-delta-hidden"),
    pytest.param("o", 1, True, id="plain-event-marked-shared"),
    pytest.param("f", 1, True, id="fork-copy-marked-shared"),
])
async def test_verify_checks_the_shared_flag_against_the_payload(
    sql_target: BackendTarget, session: str, seq: int, value: bool
) -> None:
    store = await open_store(sql_target.url, auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="o")
        await store.append("o", [text_event("hi", id="e1"),
                                 delta_event({"user:u": 1}, id="e2"),
                                 text_event("end", id="e3")], expected_version=0)
        await store.fork("o", at=3, new_session_id="f")
    finally:
        await store.aclose()
    await raw(sql_target, "UPDATE evs_events SET shared_state = ? WHERE session_id = ? AND seq = ?",
              value, session, seq)
    reader = await open_store(sql_target.url)
    try:
        found = [(f.seq, f.code) for f in await verify_session(reader, session)]
    finally:
        await reader.aclose()
    assert found == [(seq, "shared_flag")]
