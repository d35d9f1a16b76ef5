"""The header line of an export, read for ``evs import`` without holding it: the hash chain it
carries (a hash and a signature per event, ~200 bytes an event as JSON) goes to a temporary
file as it is read, and only the rest of the header is parsed in memory.

The header ``dump_header`` writes (``…,"chain":{"hashes":[…],"signatures":[…]}}``) is read a
chunk at a time; any other shape — a hand-edited header, a bad value — is read whole by
``parse_header`` instead, which then names the problem as it always did. Blocking (a file).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import IO

from .._exchange import ExportFormatError, ExportHeader, parse_header

__all__ = ["HEADER_CHUNK", "CarriedChain", "read_header"]

HEADER_CHUNK = 1 << 16
"""Bytes of the header line read at a time; a shorter header line is parsed whole."""

_MARKER = b',"chain":{"hashes":['
_SIGNATURES = b'],"signatures":['
_HASH = re.compile(rb'"([0-9a-fA-F]{64})"(,|(?=\]))')
_SIGNATURE = re.compile(rb'(?:null|"((?:[0-9a-fA-F]{2})*)")(,|(?=\]))')
_BATCH = 10_000
_LONGEST = 4096
"""Bytes read ahead for one item (a signature longer than this is read whole)."""


class CarriedChain:
    """Each event's chain hash and signature as the export carries them (seq 1, 2 …), in a
    private temporary SQLite file deleted on ``close``."""

    def __init__(self) -> None:
        # "": a private on-disk database SQLite deletes on close.
        self._conn = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA cache_size = -1024")
        self._conn.execute("PRAGMA journal_mode = OFF")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute("CREATE TABLE chain (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL, "
                           "signature BLOB)")
        self._conn.execute("BEGIN")
        self.count = 0
        """How many events' links it holds."""

    def extend(self, links: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Add the next events' (hash, signature) links."""
        rows = [(self.count + n, h, s) for n, (h, s) in enumerate(links, start=1)]
        self._conn.executemany("INSERT INTO chain VALUES (?, ?, ?)", rows)
        self.count += len(rows)

    def sign(self, signatures: Iterable[tuple[bytes, int]]) -> None:
        """Set the signatures of the events already added: (signature, seq) pairs."""
        self._conn.executemany("UPDATE chain SET signature = ? WHERE seq = ?", signatures)

    def page(self, first: int, last: int) -> list[tuple[bytes, bytes | None]]:
        """The (hash, signature) links of seq ``first`` to ``last``, in seq order."""
        return [(h, s) for h, s in self._conn.execute(
            "SELECT hash, signature FROM chain WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (first, last))]

    def close(self) -> None:
        """Delete the file."""
        self._conn.close()


def read_header(file: IO[bytes]) -> tuple[ExportHeader, CarriedChain | None, int]:
    """Read the header line, the first non-blank line of ``file`` (left at the line after it);
    return it without its chain (``chain`` None), the chain it carries (None when it carries
    none) and its line number. Raises ExportFormatError as ``parse_header`` does."""
    number = 0
    while True:
        start = file.tell()
        number += 1
        chunk = file.readline(HEADER_CHUNK)
        if not chunk:
            raise ExportFormatError(1, "the file is empty; expected a header line.")
        if chunk.strip():
            break
        if not chunk.endswith(b"\n") and len(chunk) == HEADER_CHUNK:
            file.seek(start)  # a blank line longer than a chunk: read it whole
            if (line := file.readline()).strip():
                return _whole(number, line)
    if chunk.endswith(b"\n") or len(chunk) < HEADER_CHUNK:
        return _whole(number, chunk)
    chain = CarriedChain()
    try:
        header = _streamed(file, number, chunk, chain)
        if header is None:
            chain.close()
            file.seek(start)
            return _whole(number, file.readline())
        return header, chain, number
    except BaseException:
        chain.close()
        raise


def _whole(number: int, line: bytes) -> tuple[ExportHeader, CarriedChain | None, int]:
    header = parse_header(number, line)
    if header.chain is None:
        return header, None, number
    chain = CarriedChain()
    try:
        for start in range(1, (header.events or 0) + 1, _BATCH):
            seqs = range(start, min(start + _BATCH, (header.events or 0) + 1))
            chain.extend((header.chain_hash(s), header.signature(s)) for s in seqs)
    except BaseException:
        chain.close()
        raise
    return replace(header, chain=None, chain_signatures=None), chain, number


class _Line:
    """The rest of a long line, a chunk at a time."""

    def __init__(self, file: IO[bytes], chunk: bytes) -> None:
        self.file = file
        self.buf = chunk
        self.pos = 0
        self.ended = chunk.endswith(b"\n") or len(chunk) < HEADER_CHUNK

    def want(self, size: int) -> None:
        """Have at least ``size`` unread bytes at hand, unless the line ends first."""
        while len(self.buf) - self.pos < size and not self.ended:
            more = self.file.readline(HEADER_CHUNK)
            self.ended = more.endswith(b"\n") or len(more) < HEADER_CHUNK
            self.buf = self.buf[self.pos:] + more
            self.pos = 0

    def take(self, literal: bytes) -> bool:
        """Consume ``literal`` if it comes next."""
        self.want(len(literal))
        if self.buf.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False


def _streamed(file: IO[bytes], number: int, chunk: bytes,
              chain: CarriedChain) -> ExportHeader | None:
    """The header of the shape ``dump_header`` writes, its chain streamed into ``chain``;
    None for any other shape (to be read whole)."""
    at = chunk.find(_MARKER)
    if at < 0:
        return None
    try:
        header = parse_header(number, chunk[:at] + b"}")
    except ExportFormatError:
        return None  # the whole line's parse names the problem
    line = _Line(file, chunk)
    line.pos = at + len(_MARKER)
    batch: list[tuple[bytes, bytes | None]] = []
    for found in _items(line, _HASH):
        if found is None:
            return None
        batch.append((bytes.fromhex(found.decode()), None))
        if len(batch) == _BATCH:
            chain.extend(batch)
            batch = []
    chain.extend(batch)
    if not line.take(_SIGNATURES):
        return None
    signed: list[tuple[bytes, int]] = []
    count = 0
    for found in _items(line, _SIGNATURE, null=True):
        count += 1
        if found is _INVALID:
            return None
        if found is not None:
            signed.append((bytes.fromhex(found.decode()), count))
            if len(signed) == _BATCH:
                chain.sign(signed)
                signed = []
    chain.sign(signed)
    if not line.take(b"]}}"):
        return None
    line.want(HEADER_CHUNK)
    if (not line.ended or line.buf[line.pos:].strip() or count != chain.count
            or chain.count != header.events):
        return None
    return header


_INVALID = b"\x00invalid"


def _items(line: _Line, pattern: re.Pattern[bytes], *,
           null: bool = False) -> Iterator[bytes | None]:
    """The values of a JSON array's items (``pattern``'s first group) up to its ``]``, left
    next; ``None`` for a ``null`` item when ``null``. A value that does not match yields
    None (``null``: ``_INVALID``) and stops."""
    bad = _INVALID if null else None
    line.want(1)
    if line.buf.startswith(b"]", line.pos):
        return
    while True:
        line.want(_LONGEST)
        found = pattern.match(line.buf, line.pos)
        if found is None:
            yield bad
            return
        line.pos = found.end()
        yield found[1]
        if not found[2]:
            return  # the ']' comes next
