"""What the SQLite and PostgreSQL backends share: column lists and row-to-record conversion.

Both backends select event rows with ``EVENT_COLUMNS`` in this order and session rows with
``SESSION_COLUMNS``, so one pair of converters serves both drivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from eventstore._exceptions import CorruptEventError, SessionNotFoundError
from eventstore._scopes import ScopeEntry, ScopeHead

from ..protocol import EventRow, SessionRecord, StoredEvent

__all__ = [
    "APP_POSITIONS_SQL",
    "SEAL_ARTIFACT_SQL",
    "BOUND_SHARED",
    "EVENT_COLUMNS",
    "MAX_POSITION",
    "SCOPE_COLUMNS",
    "SCOPE_HEAD_COLUMNS",
    "MAX_SEQ",
    "NEWEST_ROW_KEY",
    "SEQ_BITS",
    "SESSION_COLUMNS",
    "USER_SCOPE",
    "ROW_COLUMNS",
    "Wakeups",
    "artifact_scope",
    "artifact_seal_params",
    "event_rows",
    "payload_bytes",
    "prefixed",
    "scope",
    "seq_bound",
    "session_record",
    "row_key",
    "scope_entries",
    "scope_heads",
    "seq_of_row_key",
    "shared_scope",
    "sqlite_file",
    "stored_event",
    "stored_events",
    "stored_type",
]

EVENT_COLUMNS = (
    "seq, position, event_id, kind, invocation_id, author, timestamp, shared_state, "
    "schema_version, payload, chain_hash, signature"
)
"""Columns of ``evs_events`` read into a StoredEvent, in ``stored_event``'s order."""

ROW_COLUMNS = "seq, event_id, invocation_id, author, timestamp, schema_version, payload"
"""Columns of ``evs_events`` read into an ``EventRow``, in its order."""

SESSION_COLUMNS = (
    "s.session_id, s.app_name, s.user_id, s.created_at, e.seq, e.timestamp, s.head_seq, "
    "s.head_hash, s.head_signature, s.given_id"
)
"""A session row joined (``e``) to its newest event, in ``session_record``'s order."""

MAX_SEQ = (1 << 31) - 1
"""The largest ``seq`` a column can hold; stands in for "no upper bound" in range reads."""

BOUND_SHARED = (
    "JOIN evs_scope_entries e ON e.app_name = sn.app_name AND e.user_id = sn.user_id "
    "AND e.stream_seq = sn.event_count AND e.position = sn.position "
    "AND e.chain_hash = sn.chain_hash"
)
"""Joined to ``evs_shared_snapshots sn``: keeps only the snapshots whose newest folded stream
entry still holds the chain hash they name at their position (revision 0020)."""

APP_POSITIONS_SQL = (
    "SELECT a.app_name, p.position, a.highest FROM (SELECT app_name, max(position) AS highest "
    "FROM (SELECT app_name, position FROM evs_events WHERE shared_state UNION ALL "
    "SELECT app_name, position FROM evs_scope_entries) AS u GROUP BY app_name) AS a "
    "LEFT JOIN evs_app_positions p ON p.app_name = a.app_name ORDER BY a.app_name"
)
"""``Backend.app_positions``: each app's counter beside the highest position its log holds."""

SEQ_BITS = 32
"""``evs_events.row_key`` is ``session_key << SEQ_BITS | seq`` (``seq`` < 2**31)."""

NEWEST_ROW_KEY = (
    "(SELECT row_key FROM evs_events "
    f"WHERE row_key > s.session_key << {SEQ_BITS} "
    f"AND row_key < (s.session_key + 1) << {SEQ_BITS} ORDER BY row_key DESC LIMIT 1)"
)
"""The ``row_key`` of the newest event of session row ``s`` (NULL when it has none). Written
as the first row of a backward range scan, not ``max(row_key)``: PostgreSQL, planning with the
statistics of a young table, aggregated ``max`` over every row of the session."""

MAX_POSITION = (1 << 63) - 1
"""The largest global ``position``; stands in for "no upper bound"."""


def prefixed(columns: str, alias: str) -> str:
    """``columns`` (a comma-separated list such as ``EVENT_COLUMNS``) with each column
    qualified by the table ``alias`` (``e.seq, e.position, …``), for a query that joins."""
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))


def row_key(session_key: int, seq: int) -> int:
    """Return ``evs_events.row_key`` of event ``seq`` of a session (see ``_schema.Event``)."""
    return (session_key << SEQ_BITS) | seq


def seq_of_row_key(key: int | None) -> int:
    """Return the ``seq`` a ``row_key`` holds (0 for None: a session without events)."""
    return 0 if key is None else key & ((1 << SEQ_BITS) - 1)


def sqlite_file(url: str) -> Path | None:
    """Return the file a resolved SQLite URL (``sqlite+aiosqlite:///path``) names, or None for
    other URLs and in-memory SQLite."""
    if not url.startswith("sqlite"):
        return None
    rest = url.split("://", 1)[-1].split("?", 1)[0]
    if not rest.startswith("/"):
        return None
    # Percent-escapes are decoded as SQLAlchemy decodes them (resolve_url encodes plain paths).
    path = urllib.parse.unquote(rest[1:])
    return None if path in ("", ":memory:") else Path(path)


def seq_bound(value: int | None) -> int:
    """Clamp a caller's ``seq`` bound into the column's range (None means no bound)."""
    return MAX_SEQ if value is None else max(0, min(value, MAX_SEQ))

USER_SCOPE = ""
"""``evs_artifacts.session_scope`` of user-scoped artifacts."""


def scope(session_id: str | None) -> str:
    """Return the ``session_scope`` column value for an artifact scope."""
    return USER_SCOPE if session_id is None else session_id


def artifact_scope(session_scope: str) -> str | None:
    """Return the artifact scope an ``evs_artifacts.session_scope`` value names (``scope``'s
    inverse: None for the user's)."""
    return None if session_scope == USER_SCOPE else session_scope


SEAL_ARTIFACT_SQL = (
    "UPDATE evs_artifacts SET digest = coalesce(digest, ?), signature = ? "
    "WHERE app_name = ? AND user_id = ? AND session_scope = ? AND filename = ? AND version = ? "
    "AND signature IS NULL AND (digest IS NULL OR digest = ?)"
)
"""``Backend.store_artifact_seal``'s one statement: parameters ``(digest, signature, app,
user, session_scope, filename, version, digest)`` (``artifact_seal_params``)."""


def artifact_seal_params(key: tuple[str, str, str, str], version: int, digest: bytes,
                         signature: bytes) -> tuple[Any, ...]:
    """The parameters of ``SEAL_ARTIFACT_SQL`` for version ``version`` of the artifact
    ``key`` names (app, user, session_scope, filename)."""
    return (digest, signature, *key, version, digest)


def shared_scope(user_id: str | None) -> str:
    """Return ``evs_shared_snapshots.user_id`` for a scope: the user, or ``''`` for ``app:``."""
    return "" if user_id is None else user_id


def session_record(row: Sequence[Any]) -> SessionRecord:
    """Build a SessionRecord from a ``SESSION_COLUMNS`` row."""
    (session_id, app_name, user_id, created_at, seq, timestamp, head_seq, head_hash,
     head_signature, given_id) = row
    return SessionRecord(
        session_id=session_id,
        given_id=given_id,
        app_name=app_name,
        user_id=user_id,
        created_at=created_at,
        version=0 if seq is None else seq,
        updated_at=created_at if timestamp is None else timestamp,
        head_seq=head_seq,
        head_hash=_optional_bytes(head_hash),
        head_signature=_optional_bytes(head_signature),
    )


def _optional_bytes(value: object) -> bytes | None:
    return None if value is None else payload_bytes(value)


def stored_event(session_id: str, row: Sequence[Any]) -> StoredEvent:
    """Build a StoredEvent from an ``EVENT_COLUMNS`` row."""
    (seq, position, event_id, kind, invocation_id, author, ts, shared, version, payload,
     chain_hash, signature) = row
    return StoredEvent(
        session_id=session_id,
        seq=seq,
        position=position,
        event_id=event_id,
        kind=kind,
        invocation_id=invocation_id,
        author=author,
        timestamp=ts,
        shared_state=bool(shared),
        schema_version=version,
        payload=payload_bytes(payload),
        chain_hash=_optional_bytes(chain_hash),
        signature=_optional_bytes(signature),
        damage=None if isinstance(payload, (bytes, bytearray, memoryview)) else (
            f"its payload is stored as {stored_type(payload)}, not as bytes"
        ),
    )


SCOPE_COLUMNS = (
    "app_name, user_id, stream_seq, position, session_id, seq, event_id, delta, chain_hash, "
    "signature"
)
"""The columns of ``evs_scope_entries`` both backends select, in ``scope_entries``' order."""

SCOPE_HEAD_COLUMNS = "app_name, user_id, head_seq, head_hash, head_signature"
"""The columns of ``evs_scope_heads`` both backends select, in ``scope_heads``' order."""


def scope_entries(rows: Iterable[Sequence[Any]]) -> list[ScopeEntry]:
    """Build ScopeEntries from ``SCOPE_COLUMNS`` rows (bytes columns a hand edit filled with
    something else come back as ``payload_bytes`` makes them: the chain then names the row)."""
    return [
        ScopeEntry(app_name=app, user_id=user, stream_seq=int(stream_seq),
                   position=int(position), session_id=sid, seq=int(seq), event_id=event_id,
                   delta=payload_bytes(delta), chain_hash=_optional_bytes(chain_hash),
                   signature=_optional_bytes(signature))
        for (app, user, stream_seq, position, sid, seq, event_id, delta, chain_hash,
             signature) in rows
    ]


def scope_heads(rows: Iterable[Sequence[Any]]) -> list[ScopeHead]:
    """Build ScopeHeads from ``SCOPE_HEAD_COLUMNS`` rows."""
    return [
        ScopeHead(app_name=app, user_id=user, head_seq=int(head_seq),
                  head_hash=_optional_bytes(head_hash),
                  head_signature=_optional_bytes(head_signature))
        for app, user, head_seq, head_hash, head_signature in rows
    ]


def stored_type(value: object) -> str:
    """Name the SQL type a column value came back as (for corruption messages)."""
    if isinstance(value, str):
        return "TEXT"
    if isinstance(value, bool | int):
        return "an INTEGER"
    if isinstance(value, float):
        return "a REAL"
    if value is None:
        return "NULL"
    return type(value).__name__


def payload_bytes(value: object) -> bytes:
    """Return a bytes column's value as bytes, whatever a hand edit stored there (text becomes
    its UTF-8, other values their text), so that a damaged row can still be shown raw."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return b"" if value is None else str(value).encode()


def event_rows(session_id: str, rows: Iterable[Sequence[Any]]) -> list[EventRow]:
    """``EventRow`` tuples of ``ROW_COLUMNS`` rows; raises CorruptEventError at the first row
    whose payload is not bytes (as decoding its StoredEvent would)."""
    out: list[EventRow] = []
    for row in rows:
        payload = row[6]
        if type(payload) is not bytes:
            if not isinstance(payload, (bytearray, memoryview)):
                raise CorruptEventError(
                    session_id, row[0],
                    f"its payload is stored as {stored_type(payload)}, not as bytes.",
                )
            row = (*row[:6], bytes(payload))
        out.append(row if type(row) is tuple else tuple(row))
    return out


def stored_events(session_id: str, rows: Iterable[Sequence[Any]]) -> list[StoredEvent]:
    """Build StoredEvents from ``EVENT_COLUMNS`` rows: what ``stored_event`` builds of each.

    A long read builds thousands: rows whose payload is bytes (all but damaged ones) are
    filled in directly, without the frozen dataclass's keyword ``__init__`` (half the cost of
    reading a session otherwise)."""
    new, put = object.__new__, object.__setattr__
    out = []
    for row in rows:
        (seq, position, event_id, kind, invocation_id, author, ts, shared, version, payload,
         chain_hash, signature) = row
        if type(payload) is not bytes:
            out.append(stored_event(session_id, row))
            continue
        event = new(StoredEvent)
        put(event, "session_id", session_id)
        put(event, "seq", seq)
        put(event, "position", position)
        put(event, "event_id", event_id)
        put(event, "kind", kind)
        put(event, "invocation_id", invocation_id)
        put(event, "author", author)
        put(event, "timestamp", ts)
        put(event, "shared_state", bool(shared))
        put(event, "schema_version", version)
        put(event, "payload", payload)
        put(event, "chain_hash", _optional_bytes(chain_hash))
        put(event, "signature", _optional_bytes(signature))
        put(event, "damage", None)
        out.append(event)
    return out


class Wakeups:
    """In-process wake-ups for live tails, plus polling for writes made by other processes.

    ``wake(session_id)`` is called after a local append (or a notification); ``wait`` returns as
    soon as the session's version passes ``after``, polling the version every ``poll_interval``
    seconds in between. A wake-up is only a hint: callers always re-read from their cursor.
    """

    def __init__(self, *, poll_interval: float) -> None:
        self._poll_interval = poll_interval
        self._changed: dict[str, asyncio.Event] = {}

    def wake(self, session_id: str) -> None:
        """Wake every waiter of ``session_id``."""
        event = self._changed.pop(session_id, None)
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake every waiter (the backend is closing)."""
        for event in self._changed.values():
            event.set()
        self._changed.clear()

    async def wait(
        self,
        session_id: str,
        *,
        after: int,
        max_wait: float,
        read_version: Callable[[], Awaitable[int | None]],
    ) -> None:
        """Return once the version read by ``read_version`` exceeds ``after``, the session is
        gone, or ``max_wait`` seconds passed. Raises SessionNotFoundError when the session does
        not exist on the first read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        first = True
        while True:
            # Registered before the version is read, so a wake-up in between is not missed.
            changed = self._changed.setdefault(session_id, asyncio.Event())
            current = await read_version()
            if current is None:
                if first:
                    raise SessionNotFoundError(session_id)
                return
            first = False
            remaining = deadline - loop.time()
            if current > after or remaining <= 0:
                return
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the wait ends (a Ctrl-C would then leave a tail running).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, self._poll_interval)):
                    await changed.wait()
