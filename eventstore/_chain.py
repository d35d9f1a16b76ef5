"""The hash chain and the signatures that make a session's log tamper-evident.

Every stored event carries ``chain_hash``::

    digest     = sha256(FRAME_TAG ‖ frame(event_id) ‖ frame(invocation_id) ‖ frame(author)
                        ‖ frame(kind) ‖ frame(timestamp) ‖ frame(schema_version)
                        ‖ frame(payload))
    chain_hash = sha256(prev_chain_hash ‖ seq as 8 bytes big-endian ‖ digest)

where ``frame(x)`` is the 4-byte big-endian length of ``x``'s bytes followed by them (strings
as UTF-8, the timestamp as its 8-byte IEEE-754 double, the schema version 8 bytes), so no
field boundary can be shifted. ``prev_chain_hash`` of seq 1 is 32 zero
bytes (``GENESIS``). Everything the runtime trusts of a row is covered; ``position`` (handed
out by the store, different in a copy) and the session id are not: a copy of a log's prefix
under another session id (a fork, an import) keeps valid hashes. Nor is ``shared_state``: it is
derived from the payload (does the state delta hold ``user:``/``app:`` keys?), a fork's copies
store it false (their shared deltas count once, in the origin), and ``evs verify`` checks it
against the payload (code ``shared_flag``).

The outer hash takes fixed-size parts only, which is what lets PostgreSQL's ``evs_append``
chain client-computed digests with its built-in ``sha256(bytea)`` and store byte-for-byte what
this module computes.

Keyed mode adds ``signature = HMAC-SHA256(key, frame(session_id) ‖ chain_hash)``: it binds the
event to its session and its place in the chain, so someone without the key cannot write an
event that checks out. A store re-signing a copy under a new session id uses ``sign_event``.

Shared state (``user:`` keys of an app and user, ``app:`` keys of an app) is a stream of its own
per scope (``ScopeEntry``), chained the same way with a digest that binds the scope::

    digest     = sha256(SCOPE_TAG ‖ frame(app_name) ‖ frame(user_id, '' for app:)
                        ‖ frame(session_id) ‖ frame(event_id) ‖ origin seq as 8 bytes
                        ‖ position as 8 bytes ‖ frame(delta))
    chain_hash = sha256(prev_chain_hash ‖ stream_seq as 8 bytes ‖ digest)

so an entry moved to another scope, renumbered, or pointed at another origin event no longer
links. Keyed mode signs each entry (``sign_scope_entry``) and the stream's head record
(``sign_scope_head``), whose message frames the scope too.

Caches are bound to what they fold and, keyed, carry a MAC: a session's state at a seq (a
snapshot or a head state, ``sign_head_state``) names the chain hash of the event at that seq; a
scope's snapshot (``sign_shared_snapshot``) names the stream seq, position and chain hash of
the newest entry it folds. A reader uses a cache only while the log still holds that hash at
that place and, keyed, the MAC is the key's. An artifact version's row carries
``artifact_digest`` (its filename, version, MIME type, save time, metadata and the sha256
of its bytes) and, keyed, ``sign_artifact`` of it; a fork link carries ``fork_link_digest`` and,
keyed, ``sign_fork_link``. A keyed store appends ``sign_session_cache`` to each session cache
(``EventStore.save_cache``) and serves none whose MAC fails.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Iterable
from typing import Final, Protocol

__all__ = [
    "CACHE_MAC_SIZE",
    "FRAME_TAG",
    "GENESIS",
    "SCOPE_TAG",
    "SIGNING_KEY_ENV",
    "Chained",
    "artifact_digest",
    "chain_hashes",
    "content_digest",
    "fork_link_digest",
    "link",
    "resolve_signing_key",
    "scope_digest",
    "sign_artifact",
    "sign_event",
    "sign_fork_link",
    "sign_head",
    "sign_head_state",
    "sign_scope_entry",
    "sign_scope_head",
    "sign_session_cache",
    "sign_shared_snapshot",
    "signature_ok",
]

GENESIS: Final = bytes(32)
"""The ``prev_chain_hash`` of a session's first event."""

FRAME_TAG: Final = b"evs-chain-1\0"
"""Prefix of every content digest (names the framing, so a future one cannot collide)."""

SCOPE_TAG: Final = b"evs-scope-1\0"
"""Prefix of every shared-state stream entry's digest (apart from an event's ``FRAME_TAG``)."""

SIGNING_KEY_ENV: Final = "EVS_SIGNING_KEY"
"""Environment variable holding the signing key when ``open_store`` is given none."""

_LENGTH = struct.Struct(">I")
_NUMBERS = struct.Struct(">IdIq")
"""``frame(timestamp as a double) ‖ frame(schema version as 8 bytes)``."""
_pack_length = _LENGTH.pack
_pack_numbers = _NUMBERS.pack
_sha256 = hashlib.sha256


class Chained(Protocol):
    """The fields of an event the chain covers (``NewEvent`` and ``StoredEvent`` have them)."""

    @property
    def event_id(self) -> str: ...
    @property
    def invocation_id(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def schema_version(self) -> int: ...
    @property
    def payload(self) -> bytes: ...


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def content_digest(event: Chained) -> bytes:
    """Return the sha256 digest of the event's framed columns (see the module docstring).

    Raises ValueError for a string that is not valid Unicode text (a damaged row).
    """
    # Every append hashes each of its events: strict UTF-8 (what any stored text is) takes
    # the encoder's fast path; only text holding a lone surrogate needs "surrogatepass".
    try:
        event_id = event.event_id.encode()
        invocation_id = event.invocation_id.encode()
        author = event.author.encode()
        kind = event.kind.encode()
    except UnicodeEncodeError:
        event_id = event.event_id.encode("utf-8", "surrogatepass")
        invocation_id = event.invocation_id.encode("utf-8", "surrogatepass")
        author = event.author.encode("utf-8", "surrogatepass")
        kind = event.kind.encode("utf-8", "surrogatepass")
    payload = event.payload
    if type(payload) is not bytes:
        payload = bytes(payload)
    # frame() of each part, the two fixed-size ones (8 bytes each) packed with their lengths
    return _sha256(b"".join((
        FRAME_TAG,
        _pack_length(len(event_id)), event_id,
        _pack_length(len(invocation_id)), invocation_id,
        _pack_length(len(author)), author,
        _pack_length(len(kind)), kind,
        _pack_numbers(8, float(event.timestamp), 8, int(event.schema_version)),
        _pack_length(len(payload)), payload,
    ))).digest()


def _text(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return _LENGTH.pack(len(data)) + data


def scope_digest(app_name: str, user_id: str, *, session_id: str, event_id: str, seq: int,
                 position: int, delta: bytes) -> bytes:
    """Return the sha256 digest of one shared-state stream entry (see the module docstring):
    the scope ``(app_name, user_id)`` (``user_id`` ``''`` for ``app:`` keys), the event it came
    from and the delta it carries. Raises ValueError for a string that is not valid text."""
    return hashlib.sha256(b"".join((
        SCOPE_TAG, _text(app_name), _text(user_id), _text(session_id), _text(event_id),
        seq.to_bytes(8, "big", signed=True), position.to_bytes(8, "big", signed=True),
        _LENGTH.pack(len(delta)), bytes(delta),
    ))).digest()


def sign_scope_entry(key: bytes, app_name: str, user_id: str, chain_hash: bytes) -> bytes:
    """Return the signature of the stream entry with ``chain_hash`` in scope ``(app_name,
    user_id)`` (HMAC-SHA256 under ``key``)."""
    message = b"evs-scope-entry-1\0" + _text(app_name) + _text(user_id) + chain_hash
    return hmac.new(key, message, hashlib.sha256).digest()


def sign_scope_head(key: bytes, app_name: str, user_id: str, head_seq: int,
                    head_hash: bytes) -> bytes:
    """Return the signature of a stream's head record (its scope, ``head_seq``,
    ``head_hash``)."""
    message = (b"evs-scope-head-1\0" + _text(app_name) + _text(user_id)
               + head_seq.to_bytes(8, "big") + head_hash)
    return hmac.new(key, message, hashlib.sha256).digest()


def link(prev: bytes, seq: int, digest: bytes) -> bytes:
    """Return the chain hash of the event at ``seq`` with content ``digest`` after ``prev``."""
    return hashlib.sha256(prev + seq.to_bytes(8, "big") + digest).digest()


def chain_hashes(prev: bytes, first_seq: int, events: Iterable[Chained]) -> list[bytes]:
    """Return the chain hashes of ``events`` stored at ``first_seq, first_seq + 1, …`` after
    the event whose chain hash is ``prev``."""
    out: list[bytes] = []
    seq = first_seq
    for event in events:
        prev = link(prev, seq, content_digest(event))
        out.append(prev)
        seq += 1
    return out


def sign_event(key: bytes, session_id: str, chain_hash: bytes) -> bytes:
    """Return the signature of the event with ``chain_hash`` in session ``session_id``:
    HMAC-SHA256 under ``key`` (what a keyed store stores; a store copying events to another
    session signs them again with this)."""
    message = _frame(session_id.encode("utf-8", "surrogatepass")) + chain_hash
    return hmac.new(key, message, hashlib.sha256).digest()


def sign_head(key: bytes, session_id: str, head_seq: int, head_hash: bytes) -> bytes:
    """Return the signature of a session's head record (HMAC-SHA256 under ``key`` of the
    session id, ``head_seq`` and ``head_hash``)."""
    message = (_frame(session_id.encode("utf-8", "surrogatepass"))
               + head_seq.to_bytes(8, "big") + head_hash)
    return hmac.new(key, b"evs-head-1\0" + message, hashlib.sha256).digest()


def sign_head_state(key: bytes, session_id: str, seq: int, chain_hash: bytes,
                    state: bytes) -> bytes:
    """Return the MAC of a cache row of a session's own state at ``seq`` (a head state or a
    snapshot; HMAC-SHA256 under ``key`` of the session id, ``seq``, the chain hash of the event
    at ``seq`` and the encoded state): a keyed store uses a row only when it holds this, so a
    row written behind its back is ignored and the state folded from the log."""
    message = (_frame(session_id.encode("utf-8", "surrogatepass")) + seq.to_bytes(8, "big")
               + _frame(chain_hash) + state)
    return hmac.new(key, b"evs-head-state-1\0" + message, hashlib.sha256).digest()


def sign_shared_snapshot(key: bytes, app_name: str, user_id: str, *, position: int, count: int,
                         chain_hash: bytes, state: bytes) -> bytes:
    """Return the MAC of a scope's snapshot row (HMAC-SHA256 under ``key`` of the scope
    ``(app_name, user_id)``, ``user_id`` ``''`` for ``app:``, the stream seq ``count`` and app
    ``position`` of the newest entry it folds, that entry's chain hash and the encoded state):
    a keyed store uses a row only when it holds this."""
    message = (_text(app_name) + _text(user_id) + count.to_bytes(8, "big", signed=True)
               + position.to_bytes(8, "big", signed=True) + _frame(chain_hash) + state)
    return hmac.new(key, b"evs-shared-snapshot-1\0" + message, hashlib.sha256).digest()


def artifact_digest(filename: str, *, version: int, mime_type: str, created_at: float,
                    metadata: bytes | None, data: bytes) -> bytes:
    """Return the sha256 digest of one artifact version's row: its filename, version, MIME
    type, save time, metadata (``None`` framed apart from empty) and the sha256 of its bytes.
    Where the row is stored (app, user, session scope) is not covered: a fork copies versions
    into its own scope. Raises ValueError for a string that is not valid text."""
    meta = b"\0" if metadata is None else b"\1" + _frame(bytes(metadata))
    return hashlib.sha256(b"".join((
        b"evs-artifact-1\0", _text(filename), version.to_bytes(8, "big", signed=True),
        _text(mime_type), struct.pack(">d", float(created_at)), meta,
        hashlib.sha256(bytes(data)).digest(),
    ))).digest()


def sign_artifact(key: bytes, digest: bytes) -> bytes:
    """Return the signature of an artifact version whose row has ``digest``
    (``artifact_digest``, which frames where it is stored)."""
    return hmac.new(key, b"evs-artifact-sig-1\0" + digest, hashlib.sha256).digest()


def fork_link_digest(session_id: str, origin_session_id: str, origin_seq: int,
                     forked_at: float) -> bytes:
    """Return the sha256 digest of a fork link row (the fork, its origin, the origin's seq it
    was made at and when). Raises ValueError for a string that is not valid text."""
    return hashlib.sha256(b"".join((
        b"evs-fork-1\0", _text(session_id), _text(origin_session_id),
        origin_seq.to_bytes(8, "big", signed=True), struct.pack(">d", float(forked_at)),
    ))).digest()


def sign_fork_link(key: bytes, digest: bytes) -> bytes:
    """Return the signature of a fork link whose row has ``digest`` (``fork_link_digest``)."""
    return hmac.new(key, b"evs-fork-sig-1\0" + digest, hashlib.sha256).digest()


CACHE_MAC_SIZE: Final = 32
"""Bytes of the MAC a keyed store appends to a session cache's data (``sign_session_cache``)."""


def sign_session_cache(key: bytes, session_id: str, name: str, seq: int, data: bytes) -> bytes:
    """Return the MAC of a session's named cache (``EventStore.save_cache``): HMAC-SHA256
    under ``key`` of the session's key, the cache's name, its seq and its data. A keyed store
    keeps it after the data and serves a cache only when it checks out."""
    message = _text(session_id) + _text(name) + seq.to_bytes(8, "big", signed=True) + data
    return hmac.new(key, b"evs-session-cache-1\0" + message, hashlib.sha256).digest()


def signature_ok(key: bytes, session_id: str, chain_hash: bytes | None,
                 signature: bytes | None) -> bool:
    """Whether ``signature`` is the key's signature of ``chain_hash`` in the session
    (constant-time comparison; False when either is missing)."""
    if chain_hash is None or signature is None:
        return False
    return hmac.compare_digest(sign_event(key, session_id, chain_hash), signature)


def resolve_signing_key(key: bytes | str | None) -> bytes | None:
    """Return the signing key as bytes: ``key`` (a str is taken as UTF-8), else the
    ``EVS_SIGNING_KEY`` environment variable, else None (unkeyed). An empty key is refused
    with ValueError (it would sign nothing of value)."""
    if key is None:
        env = os.environ.get(SIGNING_KEY_ENV)
        if not env:
            return None
        key = env
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if not raw:
        raise ValueError("The signing key is empty.")
    return raw
