"""The envelope records a backend stores and returns: events as the store encoded them
(``NewEvent`` in, ``StoredEvent`` out), sessions, artifacts, snapshots, head states, memory
rows, and the builders every backend uses for the hot ones (``new_event``, ``written``). No
event class, no codec: a backend keeps bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eventstore._fork import ForkLink

__all__ = [
    "ArtifactRecord",
    "EventRow",
    "HeadState",
    "ImportPage",
    "ImportSource",
    "ImportedLink",
    "MemoryRow",
    "NewArtifact",
    "NewEvent",
    "SessionRecord",
    "SharedSnapshot",
    "StoredEvent",
    "new_event",
    "written",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An encoded event on its way into the log (no ``seq`` yet)."""

    event_id: str
    """Event id, unique within the session."""
    kind: str
    """Stable kind name (see ``EventKind``)."""
    invocation_id: str
    """Invocation that produced the event."""
    author: str
    """``user`` or an agent name."""
    timestamp: float
    """Event creation time (seconds since the epoch)."""
    shared_state: bool
    """Whether the state delta touches ``user:`` or ``app:`` keys."""
    schema_version: int
    """Payload schema version."""
    payload: bytes
    """The encoded event."""
    app_delta: bytes | None = None
    """The entry for the app's ``app:`` stream (``eventstore._scopes.scope_deltas``), or None
    when the event touches no ``app:`` key."""
    user_delta: bytes | None = None
    """The entry for the user's ``user:`` stream, or None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewArtifact:
    """An artifact version stored together with a new session (``create_session``)."""

    session_scoped: bool
    """True for the session's own artifact, False for a user-scoped one (the user's sessions
    share it)."""
    filename: str
    """Artifact filename."""
    version: int
    """The version it must get: the backend stores it as the file's next version and refuses
    (ArtifactConflictError, nothing written) when that is another number."""
    mime_type: str
    """MIME type."""
    data: bytes
    """The bytes."""
    created_at: float
    """Save time (seconds since the epoch)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """An envelope as the backend stores it."""

    session_id: str
    """Session the event belongs to."""
    seq: int
    """Position within the session: 1, 2, 3 … with no gap."""
    position: int
    """Where the event stands among its app's ``user:``/``app:`` state changes: shared-state
    events of one app get distinct, increasing positions in commit order, never handed out
    twice; any event's position is at least that of every shared-state event of its app that
    committed before its append began, and below that of every one whose append began after it
    committed. So the fold of the scopes' stream entries (which carry their event's position)
    up to an event's position never changes. The SQL backends number each app's shared-state
    events and give other events the current number; the memory backend uses one counter for
    every event."""
    event_id: str
    """Event id, unique within the session."""
    kind: str
    """Stable kind name."""
    invocation_id: str
    """Invocation that produced the event."""
    author: str
    """``user`` or an agent name."""
    timestamp: float
    """Event creation time."""
    shared_state: bool
    """Whether the event's ``user:``/``app:`` delta takes part in its app's shared fold: true
    for an appended event whose delta touches such keys, false for a fork's copy of one (the
    origin's row takes part already; ``Backend.fork_session``)."""
    schema_version: int
    """Payload schema version."""
    payload: bytes
    """The encoded event."""
    chain_hash: bytes | None = None
    """The hash chaining the row to the previous one of its session (``eventstore._chain``),
    or None when the row has none (written behind the store's back)."""
    signature: bytes | None = None
    """The row's HMAC signature when a keyed store wrote it, else None."""
    damage: str | None = None
    """Why the row cannot be decoded as stored, when the backend already knows (e.g. its payload
    column holds TEXT, not bytes: ``payload`` is then that text's UTF-8), else None. Decoding a
    damaged row raises CorruptEventError naming session and seq."""


EventRow = tuple[int, str, str, str, float, int, bytes]
"""An event row as ``Backend.read_rows`` gives it: ``(seq, event_id, invocation_id, author,
timestamp, schema_version, payload)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedLink:
    """What an export said of one event it carried: the exporting store's chain hash and
    signature, kept by ``evs import --force`` as evidence beside the importing store's own."""

    seq: int
    """The event's seq (the same in the export and in the importing session)."""
    chain_hash: bytes
    """The exporting store's chain hash of the event."""
    signature: bytes | None
    """The exporting store's signature of it, when that store was keyed."""
    origin_session_id: str
    """The session the event was exported from (its signature binds that id)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportPage:
    """One page of a session being imported (``Backend.import_session``)."""

    events: Sequence[NewEvent] = ()
    """The next events, in order (their seqs follow the previous page's)."""
    imported: Sequence[ImportedLink] = ()
    """The imported chain links of some of the session's events (``create_session``)."""
    artifacts: Sequence[NewArtifact] = ()
    """Artifact versions to store with the session (``create_session``)."""
    copy_of: ForkLink | None = None
    """When given (on the last page), the session is recorded as a copy of
    ``copy_of.origin_session_id``'s events 1..``copy_of.origin_seq`` (a fork link, as
    ``fork_session`` records one; ``session_id`` is ignored): their ``user:``/``app:``
    deltas count in that session, so these events are stored with no stream entries
    (``shared_state`` false)."""


ImportSource = Callable[[], "ImportPage | None"]
"""Gives the next page of an import, or None once there is none. It may block (it reads a
file: backends call it off the event loop) and may raise to abandon the import (nothing is
written then)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """A session's identity and summary (all of it derived from the log but the identity)."""

    session_id: str
    """The session's key, unique in the store: what its events, snapshots, caches, forks and
    signatures are stored under. The id the app gave (``given_id``) unless another app or
    user held that key when the session was made; then a fresh value (``fresh_key``)."""
    app_name: str
    """Application the session belongs to."""
    user_id: str
    """User the session belongs to."""
    created_at: float
    """Creation time (seconds since the epoch)."""
    given_id: str = ""
    """The id the app gave the session: unique per (app, user), what ``Session.id`` is. ``""``
    in a record built to create a session stands for ``session_id``."""
    version: int = 0
    """Number of events, i.e. the ``seq`` of the newest one (0 when empty)."""
    updated_at: float = 0.0
    """Timestamp of the newest event, or ``created_at`` when there is none."""
    head_seq: int | None = None
    """The ``seq`` of the newest event the store recorded appending (its head record), or None
    when the backend did not read it. Ahead of ``version`` when the log's tail was removed."""
    head_hash: bytes | None = None
    """The ``chain_hash`` of that event (None for an empty session or when not read)."""
    head_signature: bytes | None = None
    """The head record's signature when a keyed store wrote it (``eventstore._chain.sign_head``)."""

    @property
    def id(self) -> str:
        """The id the app gave the session (``given_id``, or the key when that is unset)."""
        return self.given_id or self.session_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRecord:
    """One stored version of an artifact."""

    filename: str
    """Artifact filename (``user:`` prefix for user-scoped)."""
    version: int
    """Version number: 0, 1, 2 …"""
    mime_type: str
    """MIME type given at save time."""
    data: bytes
    """The bytes."""
    created_at: float
    """Save time (seconds since the epoch)."""
    metadata: bytes | None = None
    """Custom metadata given at save time (encoded JSON object), or None."""
    digest: bytes | None = None
    """The row's stored ``eventstore._chain.artifact_digest`` (None: saved before revision
    0020, or not read)."""
    signature: bytes | None = None
    """The stored signature of ``digest`` when a keyed store saved it (``sign_artifact``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedSnapshot:
    """A cache of the folded ``user:`` (or ``app:``) state of one scope: the fold of its
    stream's entries ``1..count`` (``eventstore._scopes``)."""

    position: int
    """The app position of entry ``count`` (found by ``upto_position`` lookups)."""
    count: int
    """The stream seq of the newest entry the fold covers (entries never go away)."""
    state: bytes
    """The encoded state (orjson)."""
    chain_hash: bytes | None = None
    """The chain hash of entry ``count`` when the state was folded: backends return only a
    snapshot whose entry ``count`` still has it at ``position`` (one without is never
    returned)."""
    mac: bytes | None = None
    """HMAC of the row under the store's signing key
    (``eventstore._chain.sign_shared_snapshot``), None when written unkeyed; a keyed store
    folds the stream instead of trusting a snapshot without a valid one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadState:
    """A cache of one session's own (session-scoped) state at ``seq``: the newest seq a
    listing folded (``evs_head_states``, one row per session) or a snapshot
    (``evs_snapshots``), droppable and rebuilt from the log. It stands for the fold of the
    events ``1..seq`` only while the event at ``seq`` still has ``chain_hash`` (backends
    return no other), which covers every event before it."""

    seq: int
    """The state is the fold of events ``1..seq``."""
    chain_hash: bytes
    """The ``chain_hash`` of the event at ``seq`` when the state was folded."""
    state: bytes
    """The encoded state (orjson)."""
    mac: bytes | None = None
    """HMAC of the row under the store's signing key (``eventstore._chain.sign_head_state``),
    None when written unkeyed; a keyed store folds the log instead of trusting a row without
    a valid one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRow:
    """The searchable text of one remembered event (derived from the log)."""

    session_id: str
    """Session the event belongs to."""
    seq: int
    """The event's ``seq``."""
    author: str
    """``user`` or an agent name."""
    timestamp: float
    """The event's timestamp."""
    text: str
    """What is searched (see ``eventstore.recall.text``)."""


def _slot_setters(cls: type, *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each named slot of ``cls``: what a frozen dataclass's
    ``object.__setattr__`` ends in, without the lookup of the name on every call."""
    return tuple(getattr(cls, name).__set__ for name in names)


(_new_event_id, _new_kind, _new_invocation_id, _new_author, _new_timestamp, _new_shared_state,
 _new_schema_version, _new_payload, _new_app_delta, _new_user_delta) = _slot_setters(
    NewEvent, "event_id", "kind", "invocation_id", "author", "timestamp", "shared_state",
    "schema_version", "payload", "app_delta", "user_delta")
(_stored_session_id, _stored_seq, _stored_position, _stored_event_id, _stored_kind,
 _stored_invocation_id, _stored_author, _stored_timestamp, _stored_shared_state,
 _stored_schema_version, _stored_payload, _stored_chain_hash, _stored_signature,
 _stored_damage) = _slot_setters(
    StoredEvent, "session_id", "seq", "position", "event_id", "kind", "invocation_id", "author",
    "timestamp", "shared_state", "schema_version", "payload", "chain_hash", "signature",
    "damage")


def new_event(event_id: str, kind: str, invocation_id: str, author: str, timestamp: float,
              shared_state: bool, schema_version: int, payload: bytes,
              app_delta: bytes | None = None, user_delta: bytes | None = None) -> NewEvent:
    """A ``NewEvent`` with these fields, filled in directly like ``written`` (every append
    builds one per event on the event loop's thread)."""
    new = _new_object(NewEvent)
    _new_event_id(new, event_id)
    _new_kind(new, kind)
    _new_invocation_id(new, invocation_id)
    _new_author(new, author)
    _new_timestamp(new, timestamp)
    _new_shared_state(new, shared_state)
    _new_schema_version(new, schema_version)
    _new_payload(new, payload)
    _new_app_delta(new, app_delta)
    _new_user_delta(new, user_delta)
    return new


def written(session_id: str, event: NewEvent, *, seq: int, position: int,
            chain_hash: bytes | None = None, signature: bytes | None = None) -> StoredEvent:
    """The envelope of ``event`` as just written at ``seq``/``position`` (every backend builds
    the StoredEvents an append returns with this, so all of them return the same fields).

    Filled in directly rather than through the frozen dataclass's keyword ``__init__`` (which
    sets each field with ``object.__setattr__`` after binding keywords): the group commit
    builds one per event on the writer thread, under the GIL the event loop needs too."""
    stored = _new_object(StoredEvent)
    _stored_session_id(stored, session_id)
    _stored_seq(stored, seq)
    _stored_position(stored, position)
    _stored_event_id(stored, event.event_id)
    _stored_kind(stored, event.kind)
    _stored_invocation_id(stored, event.invocation_id)
    _stored_author(stored, event.author)
    _stored_timestamp(stored, event.timestamp)
    _stored_shared_state(stored, event.shared_state)
    _stored_schema_version(stored, event.schema_version)
    _stored_payload(stored, event.payload)
    _stored_chain_hash(stored, chain_hash)
    _stored_signature(stored, signature)
    _stored_damage(stored, None)
    return stored


_new_object = object.__new__
