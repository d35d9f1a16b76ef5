"""Tamper evidence: each way of changing a stored log behind the store's back (raw SQL on a
SQLite file and on PostgreSQL) is reported by ``evs verify`` at its seq, keyed and unkeyed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _evs_support import BackendTarget
from _tamper import SESSION, make_log, raw, tamper

from eventstore import CorruptEventError, Event, TamperedLogError, open_store
from eventstore.commands._maintain import verify_session

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
    pytest.param("seq_swapped", (3, "chain_reordered"), id="seq-swapped"),
    pytest.param("copy_inserted", (4, "chain_inserted"), id="copy-inserted"),
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


SEQ_EDITS = [pytest.param("seq_swapped", id="seq-swapped"),
             pytest.param("copy_inserted", id="copy-inserted")]


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize("kind", SEQ_EDITS)
async def test_verify_does_not_call_a_row_stored_elsewhere_missing(
    sql_target: BackendTarget, key: bytes | None, kind: str
) -> None:
    """Every seq is still held by a row: no gap, no deletion; the rows out of place are named."""
    await make_log(sql_target, signing_key=key)
    await tamper(sql_target, kind)
    found = await _findings(sql_target, key)
    codes = {code for _, code in found}
    assert not codes & {"seq_gap", "chain_deleted"}, found
    assert ({3: "seq_order"} if kind == "seq_swapped" else {4: "seq_order"}).items() <= {
        seq: code for seq, code in found if code == "seq_order"}.items(), found


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize("kind", SEQ_EDITS)
async def test_reads_never_return_events_out_of_seq_order(
    sql_target: BackendTarget, key: bytes | None, kind: str
) -> None:
    """A read that meets a row whose seq column disagrees with where it is stored fails with
    CorruptEventError naming the session and that seq (never events out of order, never a
    seq outside the range asked for); the intact prefix before it still reads."""
    await make_log(sql_target, signing_key=key)
    await tamper(sql_target, kind)
    store = await open_store(sql_target.url, signing_key=key)
    try:
        version = await store.version(SESSION)
        readers = {
            "read": lambda: store.read(SESSION),
            "read after 3": lambda: store.read(SESSION, after=3),
            "read backwards": lambda: store.read(SESSION, backwards=True),
            "read newest 4": lambda: store.read(SESSION, backwards=True, limit=4),
            "iter_backwards": lambda: _collect(store.iter_backwards(SESSION)),
            "read_mappings": lambda: store.read_mappings(SESSION),
            "read_mappings backwards": lambda: store.read_mappings(SESSION, backwards=True),
            "read_mappings since": lambda: store.read_mappings(SESSION, since=0.0),
            "get_session": lambda: store.get_session(SESSION),
            "get_session last 4": lambda: store.get_session(SESSION, last=4),
            "get_session since": lambda: store.get_session(SESSION, since=0.0),
            "state": lambda: store.state(SESSION),
            "fork": lambda: store.fork(SESSION, at=version),
        }
        wrong: dict[str, object] = {}
        for name, reader in readers.items():
            try:
                got = await reader()
            except CorruptEventError as exc:
                if exc.session_id != SESSION or "out of seq order" not in str(exc) or \
                        exc.seq not in (3, 4, 5, 6, 7):
                    wrong[name] = exc
            else:
                wrong[name] = _seqs(got)
        assert not wrong, wrong
        assert [e.seq for e in await store.read(SESSION, upto=2)] == [1, 2]
        assert [m["seq"] for m in await store.read_mappings(SESSION, upto=2)] == [1, 2]
    finally:
        await store.aclose()


async def _collect(events: AsyncIterator[Event]) -> list[Event]:
    return [event async for event in events]


def _seqs(got: object) -> object:
    """The seqs of what a reader returned (for the failure message)."""
    if isinstance(got, list):
        return [e["seq"] if isinstance(e, dict) else getattr(e, "seq", e) for e in got]
    return [e.seq for e in got.events] if hasattr(got, "events") else got


async def test_keyed_verify_under_a_wrong_key_names_the_key_as_a_cause(
    sql_target: BackendTarget,
) -> None:
    await make_log(sql_target, signing_key=KEY)
    store = await open_store(sql_target.url, signing_key=b"w" * 32)
    try:
        found = await verify_session(store, SESSION)
    finally:
        await store.aclose()
    bad = [f for f in found if f.code == "bad_signature"]
    assert len(bad) == 6, found  # every event of the log
    assert all("not the one the store signed with" in f.message for f in bad)
    # One forged row among good ones is forgery, not a wrong key.
    await raw(sql_target, "UPDATE evs_events SET signature = ? WHERE seq = 4", b"x" * 32)
    store = await open_store(sql_target.url, signing_key=KEY)
    try:
        (forged,) = await verify_session(store, SESSION)
    finally:
        await store.aclose()
    assert forged.code == "bad_signature"
    assert forged.message.endswith("it was forged or changed.")
