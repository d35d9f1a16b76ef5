"""Tampering with a stored log behind the store's back (raw SQL on SQLite files and PostgreSQL),
for the tamper-evidence tests."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from _evs_support import BackendTarget

from eventstore import Content, Event, Part, open_store
from eventstore._chain import chain_hashes
from eventstore.backends.sql import sqlite_file

__all__ = ["SESSION", "make_log", "raw", "shift", "tamper"]

SESSION = "s"


async def make_log(target: BackendTarget, *, signing_key: bytes | None, count: int = 6) -> None:
    """Store session ``s`` with ``count`` user messages ``msg 1`` … (one event per append)."""
    store = await open_store(target.url, auto_upgrade=True, signing_key=signing_key)
    try:
        await store.create_session(app_name="app", user_id="u", session_id=SESSION)
        for n in range(1, count + 1):
            await store.append(SESSION, Event(
                author="user", id=f"e{n}", timestamp=1000.0 + n,
                content=Content(role="user", parts=(Part(text=f"msg {n}"),))),
                expected_version=n - 1)
    finally:
        await store.aclose()


async def raw(target: BackendTarget, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on the target's database with the plain driver (``?`` marks)."""
    if target.name == "sqlite":
        path = sqlite_file(target.url)
        assert path is not None
        conn = sqlite3.connect(path)
        try:
            with conn:
                return [tuple(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()
    import asyncpg

    numbered = iter(range(1, 1000))
    pg_sql = re.sub(r"\?", lambda _: f"${next(numbered)}", sql)
    pg = await asyncpg.connect(target.url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return [tuple(r) for r in await pg.fetch(pg_sql, *params)]
    finally:
        await pg.close()


async def _key(target: BackendTarget) -> int:
    rows = await raw(target, "SELECT session_key FROM evs_sessions WHERE session_id = ?", SESSION)
    return int(rows[0][0])


async def shift(target: BackendTarget, *, from_seq: int, by: int) -> None:
    """Renumber the events with ``seq >= from_seq`` by ``by`` (one row at a time, in an order
    that never collides)."""
    key = await _key(target)
    seqs = [r[0] for r in await raw(
        target, "SELECT seq FROM evs_events WHERE session_id = ? AND seq >= ? ORDER BY seq",
        SESSION, from_seq)]
    for seq in (reversed(seqs) if by > 0 else seqs):
        await raw(target, "UPDATE evs_events SET seq = ?, row_key = ? WHERE row_key = ?",
                  seq + by, (key << 32) | (seq + by), (key << 32) | seq)


async def _move(target: BackendTarget, seq: int, to: int) -> None:
    key = await _key(target)
    await raw(target, "UPDATE evs_events SET seq = ?, row_key = ? WHERE row_key = ?",
              to, (key << 32) | to, (key << 32) | seq)


async def _copy_row(target: BackendTarget, seq: int, *, to: int, event_id: str,
                    chain_hash: bytes | None) -> None:
    key = await _key(target)
    await raw(
        target,
        "INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, "
        "invocation_id, author, timestamp, shared_state, app_name, user_id, schema_version, "
        "payload, chain_hash) SELECT ?, position, session_id, ?, ?, kind, invocation_id, "
        "author, timestamp, shared_state, app_name, user_id, schema_version, payload, ? "
        "FROM evs_events WHERE row_key = ?",
        (key << 32) | to, to, event_id, chain_hash, (key << 32) | seq)


async def _hash_of(target: BackendTarget, seq: int) -> bytes:
    rows = await raw(target, "SELECT chain_hash FROM evs_events WHERE session_id = ? AND seq = ?",
                     SESSION, seq)
    return bytes(rows[0][0])


async def tamper(target: BackendTarget, kind: str) -> None:
    """Change the log of session ``s`` (six events) behind the store's back, as ``kind`` says."""
    if kind == "payload_edited":
        payload = bytes((await raw(
            target, "SELECT payload FROM evs_events WHERE session_id = ? AND seq = 3",
            SESSION))[0][0])
        assert b"msg 3" in payload
        await raw(target, "UPDATE evs_events SET payload = ? WHERE session_id = ? AND seq = 3",
                  payload.replace(b"msg 3", b"msg 9"), SESSION)
    elif kind == "author_edited":
        await raw(target, "UPDATE evs_events SET author = 'mallory' WHERE session_id = ? "
                  "AND seq = 3", SESSION)
    elif kind == "inserted":
        await shift(target, from_seq=4, by=1)
        await _copy_row(target, 3, to=4, event_id="forged", chain_hash=None)
    elif kind == "inserted_with_hash":
        # Someone who knows the algorithm gives the new row a hash that links after seq 3.
        await shift(target, from_seq=4, by=1)
        rows = await raw(
            target, "SELECT event_id, invocation_id, author, kind, timestamp, shared_state, "
            "schema_version, payload FROM evs_events WHERE session_id = ? AND seq = 3", SESSION)
        fields = dict(zip(("event_id", "invocation_id", "author", "kind", "timestamp",
                           "shared_state", "schema_version", "payload"), rows[0], strict=True))
        fields.update(event_id="forged", payload=bytes(fields["payload"]))
        (forged,) = chain_hashes(await _hash_of(target, 3), 4, [_Fields(**fields)])
        await _copy_row(target, 3, to=4, event_id="forged", chain_hash=forged)
    elif kind == "deleted":
        await raw(target, "DELETE FROM evs_events WHERE session_id = ? AND seq = 3", SESSION)
    elif kind == "deleted_renumbered":
        await raw(target, "DELETE FROM evs_events WHERE session_id = ? AND seq = 3", SESSION)
        await shift(target, from_seq=4, by=-1)
    elif kind == "reordered":
        await _move(target, 3, 100)
        await _move(target, 4, 3)
        await _move(target, 100, 4)
    elif kind == "seq_swapped":
        # Only the visible seq column: the hidden row_key (the stored order) stays.
        await raw(target, "UPDATE evs_events SET seq = 7 - seq WHERE session_id = ? "
                  "AND seq IN (3, 4)", SESSION)
    elif kind == "copy_inserted":
        # A copy of seq 3 (every column but the event id) put in at seq 4 by renumbering the
        # seq column of the later rows; the copy takes the next free row_key.
        await raw(target, "UPDATE evs_events SET seq = seq + 1 WHERE session_id = ? "
                  "AND seq >= 4", SESSION)
        await _copy_row(target, 3, to=7, event_id="copied", chain_hash=await _hash_of(target, 3))
        await raw(target, "UPDATE evs_events SET seq = 4 WHERE session_id = ? "
                  "AND event_id = 'copied'", SESSION)
    elif kind == "tail_removed":
        await raw(target, "DELETE FROM evs_events WHERE session_id = ? AND seq >= 5", SESSION)
    else:
        raise AssertionError(kind)


class _Fields:
    """The chain's view of a row read with raw SQL."""

    def __init__(self, **fields: Any) -> None:
        self.event_id: str = fields["event_id"]
        self.invocation_id: str = fields["invocation_id"]
        self.author: str = fields["author"]
        self.kind: str = fields["kind"]
        self.timestamp = float(fields["timestamp"])
        self.shared_state = bool(fields["shared_state"])
        self.schema_version = int(fields["schema_version"])
        self.payload: bytes = fields["payload"]
