"""Tamper evidence: each way of changing a stored log behind the store's back (raw SQL on a
SQLite file and on PostgreSQL) is reported by ``evs verify`` at its seq, keyed and unkeyed."""

from __future__ import annotations

import pytest
from _evs_support import BackendTarget
from _tamper import SESSION, make_log, raw, tamper

from eventstore import Event, TamperedLogError, open_store
from eventstore.cli._maintain import verify_session

KEY = b"k" * 32

KEYED = [pytest.param(None, id="unkeyed"), pytest.param(KEY, id="keyed")]


async def _findings(target: BackendTarget, key: bytes | None) -> list[tuple[int | None, str]]:
    store = await open_store(target.url, signing_key=key)
    try:
        return [(f.seq, f.code) for f in await verify_session(store, SESSION)]
    finally:
        await store.aclose()


@pytest.mark.parametrize("key", KEYED)
async def test_verify_untampered_log_has_no_finding(sql_target: BackendTarget,
                                                    key: bytes | None) -> None:
    await make_log(sql_target, signing_key=key)
    assert await _findings(sql_target, key) == []


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize(("kind", "expected"), [
    pytest.param("payload_edited", (3, "chain_edited"), id="payload-edited"),
    pytest.param("author_edited", (3, "chain_edited"), id="author-edited"),
    pytest.param("inserted", (4, "chain_inserted"), id="inserted"),
    pytest.param("inserted_with_hash", (4, "chain_inserted"), id="inserted-with-hash"),
    pytest.param("deleted", (3, "chain_deleted"), id="deleted"),
    pytest.param("deleted_renumbered", (3, "chain_deleted"), id="deleted-renumbered"),
    pytest.param("reordered", (3, "chain_reordered"), id="reordered"),
    pytest.param("tail_removed", (5, "tail_removed"), id="tail-removed"),
])
async def test_verify_reports_tampering_at_its_seq(
    sql_target: BackendTarget, key: bytes | None, kind: str, expected: tuple[int, str]
) -> None:
    await make_log(sql_target, signing_key=key)
    await tamper(sql_target, kind)
    found = await _findings(sql_target, key)
    chain = [f for f in found if f[1].startswith(("chain_", "tail_", "head_"))]
    assert chain[0] == expected, found


async def test_keyed_verify_reports_rows_the_key_did_not_sign(sql_target: BackendTarget) -> None:
    await make_log(sql_target, signing_key=KEY)
    await raw(sql_target, "UPDATE evs_events SET signature = NULL WHERE seq = 2")
    await raw(sql_target, "UPDATE evs_events SET signature = ? WHERE seq = 4", b"x" * 32)
    found = await _findings(sql_target, KEY)
    assert (2, "unsigned") in found
    assert (4, "bad_signature") in found
    # Unkeyed, the chain still checks out: signatures are the key holder's business.
    assert await _findings(sql_target, None) == []


async def test_recomputed_chain_fools_unkeyed_verify_but_not_keyed(
    sql_target: BackendTarget,
) -> None:
    """Someone who can write the database and knows the algorithm can recompute every hash and
    the head (documented: unkeyed mode detects accidents and naive edits); the key's signatures
    still expose it."""
    await make_log(sql_target, signing_key=KEY)
    await raw(sql_target, "UPDATE evs_events SET author = 'mallory' WHERE seq = 3")
    rows = await raw(
        sql_target, "SELECT seq, event_id, invocation_id, author, kind, timestamp, shared_state, "
        "schema_version, payload FROM evs_events WHERE session_id = ? ORDER BY seq", SESSION)
    from _tamper import _Fields

    from eventstore._chain import GENESIS, chain_hashes
    names = ("event_id", "invocation_id", "author", "kind", "timestamp", "shared_state",
             "schema_version", "payload")
    fields = [_Fields(**dict(zip(names, (*r[1:8], bytes(r[8])), strict=True))) for r in rows]
    hashes = chain_hashes(GENESIS, 1, fields)
    for (seq, *_), h in zip(rows, hashes, strict=True):
        await raw(sql_target, "UPDATE evs_events SET chain_hash = ? WHERE seq = ?", h, seq)
    await raw(sql_target, "UPDATE evs_sessions SET head_hash = ?", hashes[-1])
    assert await _findings(sql_target, None) == []
    found = await _findings(sql_target, KEY)
    assert found[0] == (3, "bad_signature") or (3, "bad_signature") in found, found
    assert (6, "head_mismatch") in found


@pytest.mark.parametrize("key", KEYED)
async def test_append_refuses_a_log_whose_tail_was_removed(
    sql_target: BackendTarget, key: bytes | None
) -> None:
    await make_log(sql_target, signing_key=key)
    await tamper(sql_target, "tail_removed")
    store = await open_store(sql_target.url, signing_key=key)
    try:
        with pytest.raises(TamperedLogError) as caught:
            await store.append(SESSION, Event(author="user"), expected_version=None)
        assert (caught.value.head_seq, caught.value.version) == (6, 4)
        assert await store.version(SESSION) == 4
    finally:
        await store.aclose()
