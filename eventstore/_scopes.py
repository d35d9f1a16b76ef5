"""Shared state as streams of its own: one per scope, built the same way by every backend.

``user:`` keys belong to an app and a user, ``app:`` keys to an app; each such scope has a
stream of entries (stream seq 1, 2, 3 … with no gap), one per event whose state delta touches
the scope, appended in the same transaction as the event. An entry carries the delta (the
scope's keys only) and names the event it came from (session id, seq, event id, the event's
app ``position``); it outlives that session. The fold of shared state reads only the streams,
so deleting a session leaves every user's and app's state as it was (``eventstore._state``).

Each stream is hash-chained like a session's log, with the scope bound into every entry's
digest (``eventstore._chain.scope_digest``), signed in keyed mode, and has a head record (its
newest stream seq and hash) so a removed tail shows. A fork's copies append no entries (their
deltas count once, in the origin).

Knows no SQL: the backends store what ``ScopeWriter`` builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from ._chain import GENESIS, link, scope_digest, sign_scope_entry, sign_scope_head

if TYPE_CHECKING:  # the façade passes the actions; backends only store bytes
    from ._events import EventActions

__all__ = [
    "APP_SCOPE",
    "ScopeEntry",
    "ScopeHead",
    "ScopeWriter",
    "apply_scope_delta",
    "scope_deltas",
]

APP_SCOPE: Final = ""
"""The ``user_id`` of an app's ``app:`` stream (a user id is never empty)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeEntry:
    """One entry of a shared-state stream, as stored."""

    app_name: str
    """The app of the scope."""
    user_id: str
    """The user of a ``user:`` stream, ``APP_SCOPE`` for the app's ``app:`` stream."""
    stream_seq: int
    """Place in the stream: 1, 2, 3 … with no gap; the fold applies entries in this order."""
    position: int
    """The origin event's app position (``StoredEvent.position``): the state a session saw at
    one of its seqs is the fold of the entries up to that seq's position."""
    session_id: str
    """The origin event's session (the store-unique id; the session may no longer exist)."""
    seq: int
    """The origin event's seq in that session."""
    event_id: str
    """The origin event's id."""
    delta: bytes
    """The scope's part of the event's state changes (``scope_deltas``)."""
    chain_hash: bytes | None = None
    """The hash chaining the entry to the stream's previous one (None: written behind the
    store's back)."""
    signature: bytes | None = None
    """The entry's HMAC when a keyed store wrote it, else None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeHead:
    """A stream's head record: where its chain continues from."""

    app_name: str
    """The app of the scope."""
    user_id: str
    """The user, or ``APP_SCOPE``."""
    head_seq: int
    """The newest entry's stream seq."""
    head_hash: bytes | None
    """The newest entry's chain hash."""
    head_signature: bytes | None = None
    """HMAC of scope, ``head_seq`` and ``head_hash`` when a keyed store wrote it."""


def _delta(actions: EventActions, prefix: str) -> bytes | None:
    delta = {k: v for k, v in actions.state_delta.items() if k.startswith(prefix)}
    deleted = [k for k in actions.state_deletions if k.startswith(prefix)]
    if not delta and not deleted:
        return None
    body: dict[str, Any] = {"sd": delta}
    if deleted:
        body["sx"] = deleted
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def scope_deltas(actions: EventActions) -> tuple[bytes | None, bytes | None]:
    """Return the encoded ``app:`` and ``user:`` parts of an event's state changes (None for a
    scope it does not touch): ``{"sd": {key: value}, "sx": [deleted keys]}``, keys sorted, so
    the same changes always give the same bytes. Raises TypeError for a value JSON cannot
    hold (the event's own encoding refuses it first)."""
    return _delta(actions, "app:"), _delta(actions, "user:")


def apply_scope_delta(state: dict[str, Any], delta: bytes) -> None:
    """Apply one entry's delta to ``state`` in place (values, ``None`` too, replace; then the
    deletions). Raises ValueError, TypeError or AttributeError for bytes ``scope_deltas`` did
    not write."""
    body = orjson.loads(delta)
    state.update(body["sd"])
    for key in body.get("sx", ()):
        state.pop(key, None)


HeadReader = Callable[[str, str], tuple[int, bytes | None]]
"""``(app_name, user_id) -> (head_seq, head_hash)`` of a stream as committed (0, None when it
has no entry yet)."""


class ScopeWriter:
    """Builds the entries (chained, signed with ``key``) and moved heads of the streams one
    transaction appends to, reading each stream's head once through ``read_head``."""

    __slots__ = ("_heads", "_key", "_read_head", "entries")

    def __init__(self, read_head: HeadReader, key: bytes | None) -> None:
        self._read_head = read_head
        self._key = key
        self._heads: dict[tuple[str, str], tuple[int, bytes]] = {}
        self.entries: list[ScopeEntry] = []
        """The entries built so far, in the order they must be stored."""

    @property
    def key(self) -> bytes | None:
        """The signing key the entries are signed with (None: unkeyed)."""
        return self._key

    def add(self, app_name: str, user_id: str, *, session_id: str, seq: int, event_id: str,
            position: int, app_delta: bytes | None, user_delta: bytes | None) -> None:
        """Append the event's entries: to the app's stream, then to the user's."""
        for scope_user, delta in ((APP_SCOPE, app_delta), (user_id, user_delta)):
            if delta is None:
                continue
            scope = (app_name, scope_user)
            head = self._heads.get(scope)
            if head is None:
                head_seq, head_hash = self._read_head(app_name, scope_user)
                head = (head_seq, GENESIS if head_hash is None else bytes(head_hash))
            stream_seq = head[0] + 1
            chain = link(head[1], stream_seq, scope_digest(
                app_name, scope_user, session_id=session_id, event_id=event_id, seq=seq,
                position=position, delta=delta))
            self.entries.append(ScopeEntry(
                app_name=app_name, user_id=scope_user, stream_seq=stream_seq,
                position=position, session_id=session_id, seq=seq, event_id=event_id,
                delta=delta, chain_hash=chain,
                signature=None if self._key is None
                else sign_scope_entry(self._key, app_name, scope_user, chain)))
            self._heads[scope] = (stream_seq, chain)

    def heads(self) -> list[ScopeHead]:
        """The moved head record of every stream appended to."""
        key = self._key
        return [
            ScopeHead(app_name=app, user_id=user, head_seq=seq, head_hash=chain,
                      head_signature=None if key is None
                      else sign_scope_head(key, app, user, seq, chain))
            for (app, user), (seq, chain) in self._heads.items()
        ]
