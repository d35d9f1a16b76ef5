"""A private scratch index in a temporary SQLite file, for checks that must remember more of a
log than fits a page (``evs verify`` and ``evs import``'s ``LogCheck``).

Blocking (stdlib ``sqlite3``): call it off the event loop. The page cache is capped at
``CACHE_KIB``, so memory does not grow with what is kept; the file is SQLite's own temporary
database, deleted when the index closes. Nothing here is durable: no journal, no sync.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["CACHE_KIB", "CallRow", "ScratchIndex"]

CACHE_KIB = 4096
"""The scratch file's page cache (KiB): what the index keeps in memory at most."""

_LOOKUP = 500
"""Keys per ``IN (…)`` look-up (below SQLite's bound on parameters)."""

_SCHEMA = (
    "CREATE TABLE ids (id TEXT PRIMARY KEY, place INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE calls (id TEXT PRIMARY KEY, n INTEGER NOT NULL, seq INTEGER NOT NULL, "
    "name TEXT NOT NULL, long INTEGER NOT NULL, final1 INTEGER, final2 INTEGER) WITHOUT ROWID",
    "CREATE TABLE args (n INTEGER PRIMARY KEY, args BLOB NOT NULL)",
)

CallRow = tuple[str, int, int, str, bool, "int | None", "int | None"]
"""A call kept by the index: (id, n, seq, name, long-running, first final seq, second)."""


class ScratchIndex:
    """Event ids with their first place, calls with their answers' seqs, and each call's
    arguments (opaque bytes) by its number: written and looked up a page at a time."""

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            # "": a private on-disk database SQLite deletes on close.
            conn = sqlite3.connect("", check_same_thread=False, isolation_level=None)
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("BEGIN")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Delete the scratch file (the index cannot be used afterwards)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _lookup(self, sql: str, keys: Iterable[Any]) -> list[Any]:
        db, wanted = self._db(), list(keys)
        found: list[Any] = []
        for start in range(0, len(wanted), _LOOKUP):
            chunk = wanted[start:start + _LOOKUP]
            marks = ",".join("?" * len(chunk))
            found += db.execute(sql.format(marks=marks), chunk).fetchall()
        return found

    def places(self, ids: Iterable[str]) -> dict[str, int]:
        """The place kept for each of ``ids`` that has one."""
        return dict(self._lookup("SELECT id, place FROM ids WHERE id IN ({marks})", ids))

    def add_places(self, pairs: Sequence[tuple[str, int]]) -> None:
        """Keep each (id, place) pair (ids not kept yet)."""
        self._db().executemany("INSERT INTO ids VALUES (?, ?)", pairs)

    def calls(self, ids: Iterable[str]) -> list[CallRow]:
        """The calls kept under any of ``ids``."""
        return [(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in self._lookup(
            "SELECT id, n, seq, name, long, final1, final2 FROM calls WHERE id IN ({marks})",
            ids)]

    def add_calls(self, rows: Sequence[CallRow], args: Sequence[tuple[int, bytes]]) -> None:
        """Keep new calls and their arguments by call number."""
        db = self._db()
        db.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(i, n, s, name, int(long), f1, f2)
                        for i, n, s, name, long, f1, f2 in rows])
        db.executemany("INSERT INTO args VALUES (?, ?)", args)

    def set_finals(self, rows: Sequence[tuple[int | None, int | None, str]]) -> None:
        """Record (first final seq, second final seq, call id) of calls kept already."""
        self._db().executemany("UPDATE calls SET final1 = ?, final2 = ? WHERE id = ?", rows)

    def args(self, n: int) -> bytes:
        """The arguments kept for call number ``n``."""
        (blob,), = self._db().execute("SELECT args FROM args WHERE n = ?", (n,))
        return bytes(blob)
