"""What a storage backend is: the envelope records it stores and the protocol it implements.

A backend sees stored envelopes — ids, ``seq``, a kind name, payload bytes — and never imports the
event classes or the codec. The store façade (``store/facade.py``) encodes and decodes; backends
(memory, SQLite, PostgreSQL) keep bytes. Every backend gives the same guarantees; the contract
suite in ``tests/eventstore`` checks them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from hmac import compare_digest
from typing import Protocol
from uuid import uuid4

from eventstore._chain import artifact_digest, fork_link_digest, sign_artifact, sign_fork_link
from eventstore._exceptions import (
    ArtifactConflictError,
    DuplicateEventError,
    TamperedArtifactError,
)
from eventstore._fork import ForkLink, ForkPlan
from eventstore._retention import RetentionPolicy
from eventstore._scopes import ScopeEntry, ScopeHead

__all__ = [
    "ArtifactRecord",
    "Backend",
    "EventRow",
    "HeadState",
    "ImportPage",
    "ImportSource",
    "ImportedLink",
    "MemoryRow",
    "NewArtifact",
    "NewEvent",
    "ScopeEntry",
    "ScopeHead",
    "SessionRecord",
    "SharedSnapshot",
    "StoredEvent",
    "artifact_problem",
    "check_artifact_version",
    "check_served_artifact",
    "check_batch_ids",
    "check_retry",
    "fresh_key",
    "new_event",
    "same_event",
    "seal_artifact",
    "seal_fork_link",
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


class Backend(Protocol):
    """The storage contract every backend implements.

    All methods are coroutines; none blocks the event loop. Errors are the store's own
    (``eventstore._exceptions``); a driver exception never escapes. The shared-state events of
    one app become visible in ``position`` order (no reader ever sees position ``p + 1`` before
    ``p``), each with its ``user:``/``app:`` stream entries in the same transaction
    (``eventstore._scopes``), so a fold of a stream up to a position never changes later.
    """

    url: str
    """Where the data lives (secrets removed), for messages."""
    signing_key: bytes | None
    """The key signing every appended event (keyed mode), or None (see ``eventstore._chain``).
    Every backend chains its events' hashes and keeps each session's head record."""

    async def create_session(
        self,
        record: SessionRecord,
        initial: Sequence[NewEvent],
        artifacts: Sequence[NewArtifact] = (),
        imported: Sequence[ImportedLink] = (),
    ) -> str:
        """Create the session, append ``initial`` as its first events and store ``artifacts``
        (in order, each as its file's next version) and ``imported`` (the chain an imported
        log carried, ``read_imported``), all in one transaction: all of it or nothing is
        written, whatever kills the process. Returns the session's key:
        ``record.session_id`` unless another session holds that key, else a ``fresh_key()``
        (the events, artifacts and signatures are written under the key returned).

        Raises SessionExistsError when the app's user already has a session with the id
        ``record.id``, ArtifactConflictError when an artifact would get another version than
        its ``version`` (nothing written either way).
        """
        ...

    async def import_session(self, record: SessionRecord, source: ImportSource) -> str:
        """``create_session`` for a session of any length: its events, links and artifacts
        come from ``source`` a page at a time (called until it returns None) and are written
        in one transaction, so memory holds one page, not the log. All of it or nothing is
        written, whatever ``source`` raises or kills the process; what ``source`` raised is
        raised. Returns the session's key as ``create_session`` does and raises as it does.
        """
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of the session with this key, with its current version, or None."""
        ...

    async def find_sessions(
        self, given_id: str, *, app_name: str | None, user_id: str | None
    ) -> list[SessionRecord]:
        """Return the records (with current versions) of the sessions the app gave the id
        ``given_id``, of the app and user when given, ordered by app, then user: none, one, or
        (when app or user is not given) several."""
        ...

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> str:
        """Create session ``record`` (the origin's app and user) as a fork of
        ``plan.origin_session_id`` in one transaction: a copy of the origin's event rows
        1..``plan.seq`` as stored (same ids, seqs, kinds, authors, timestamps, payloads and
        global positions, so the fork's state at each copied seq is the origin's), except that
        the copies take no part in the app's ``user:``/``app:`` fold (``shared_state`` false:
        the origin's rows already do); the origin's session snapshots up to ``plan.seq``; the
        session-scoped artifact versions ``plan.artifacts`` names; and the link (``ForkLink``).
        All of it or nothing is written.

        Returns the fork's key, chosen as ``create_session`` chooses one. Raises
        SessionNotFoundError (naming the origin) when the origin does not exist or has fewer
        than ``plan.seq`` events (it was deleted meanwhile), SessionExistsError when the
        origin's user already has a session with the fork's id.
        """
        ...

    async def fork_links(self, session_id: str) -> list[ForkLink]:
        """Return the links naming the session, as a fork or as an origin, oldest first."""
        ...

    async def scope_mismatches(self, session_id: str) -> list[tuple[int, str, str]]:
        """``(seq, app_name, user_id)`` of each of the session's event rows whose own app or
        user differs from the session's, in seq order: the columns the ``user:``/``app:`` fold
        selects by, edited behind the store's back (the memory backend has no such columns and
        returns ``[]``)."""
        ...

    async def has_signed_heads(self) -> bool:
        """Whether any session's head record is signed: a keyed store wrote to the database,
        so a store without the key must not write to it (see ``EventStore``)."""
        ...

    async def list_sessions(
        self, *, app_name: str | None, user_id: str | None, after: str | None, limit: int
    ) -> list[SessionRecord]:
        """Return up to ``limit`` sessions ordered by id, with ids greater than ``after``."""
        ...

    async def delete_session(self, session_id: str, *, expected_version: int | None = None
                             ) -> bool:
        """Delete the session, its events, snapshots and session-scoped artifacts. The
        ``user:``/``app:`` stream entries its events made stay (they belong to their scope).

        With ``expected_version``, only when the session is still at that version, judged in
        the delete's own transaction (no append can commit between the check and the delete):
        otherwise raises ConcurrencyError and deletes nothing. Returns False when there was
        no such session.
        """
        ...

    async def sessions_updated_before(
        self, *, before: float, app_name: str | None, after: tuple[float, str] | None,
        limit: int,
    ) -> list[SessionRecord]:
        """Return up to ``limit`` sessions (of the app, when given) whose ``updated_at`` is
        below ``before``, ordered by ``updated_at`` then session id, after the key ``after``
        (``(updated_at, session_id)`` of the previous page's last one)."""
        ...

    async def retention_policies(self) -> list[RetentionPolicy]:
        """Return the stored retention policies, by app name."""
        ...

    async def set_retention_policy(self, policy: RetentionPolicy) -> None:
        """Store the app's retention policy, replacing the one it had."""
        ...

    async def clear_retention_policy(self, app_name: str | None) -> int:
        """Delete the app's retention policy (every policy when ``app_name`` is None); return
        how many were deleted."""
        ...

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """Append ``events`` atomically at ``expected_version + 1 …`` (or at head when None).

        ``owner`` (app, user): the session stored under ``session_id`` must be theirs, else
        SessionNotFoundError and nothing is written — a key the façade cached may have been
        given to another (app, user)'s session since another process deleted the one it
        named. Checked in the append's own transaction on SQLite and in memory, and on
        PostgreSQL after the session's lock is taken, on both paths (``evs_append`` judges
        it, revision 0019).

        Returns the stored envelopes. Re-appending events whose ids are all stored with identical
        payloads returns the stored envelopes and writes nothing. Raises SessionNotFoundError,
        ConcurrencyError (the session is not at ``expected_version``), DuplicateEventError (an id
        stored with another payload, or a partial overlap); in every error case nothing is written.
        """
        ...

    async def read(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """Return events with ``after < seq <= upto``, oldest first (newest first when
        ``backwards``), at most ``limit`` of them. Raises SessionNotFoundError, also when
        ``owner`` (app, user) is given and the session stored under ``session_id`` is not
        theirs: checked in the same query as the read, so a key the façade cached and that
        another process gave to another (app, user)'s session since never reads that
        session's events (``append``'s ``owner``)."""
        ...

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        """Return the imported chain links (``create_session``'s ``imported``) of the session
        with ``seq > after``, in seq order, at most ``limit`` (none for a session that has
        none, or does not exist)."""
        ...

    async def read_rows(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[EventRow]:
        """``read``'s events as ``EventRow`` tuples, for bulk readers that decode payloads
        themselves (no StoredEvent built per row). Raises SessionNotFoundError (``owner`` as
        in ``read``), and CorruptEventError for a row whose payload is not stored as bytes."""
        ...

    async def read_scope(
        self, *, app_name: str, user_id: str | None, after: int, upto_position: int | None,
    ) -> list[ScopeEntry]:
        """Return the entries of a shared-state stream (the app's ``app:`` stream when
        ``user_id`` is None, else the user's ``user:`` stream) with stream seq above ``after``
        and ``position <= upto_position`` (None: every one), in stream order as stored."""
        ...

    async def scope_heads(self) -> list[ScopeHead]:
        """Return the head record of every shared-state stream, ordered by app and user."""
        ...

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        """Return the newest snapshot of the scope (the app's ``app:`` state when ``user_id`` is
        None, else that user's ``user:`` state) with ``position <= upto_position`` whose entry
        ``count`` still has its ``chain_hash`` at its ``position`` (others are never
        returned)."""
        ...

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        """Store a snapshot of the scope's shared state (a cache: may be dropped). Stream
        entries are never removed, so a snapshot stays right once saved."""
        ...

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> HeadState | None:
        """Return the newest state snapshot with ``seq <= upto`` whose event at ``seq`` still
        has the snapshot's ``chain_hash`` (others are never returned); raises
        SessionNotFoundError when the session does not exist."""
        ...

    async def save_snapshot(self, session_id: str, snapshot: HeadState) -> None:
        """Store (or replace) a snapshot of the session-scoped state at ``snapshot.seq`` (a
        cache: may be dropped)."""
        ...

    async def drop_snapshots(self) -> int:
        """Delete every snapshot, session and shared, every head state and every session cache;
        return how many were dropped."""
        ...

    async def load_cache(
        self, session_id: str, name: str, *, owner: tuple[str, str] | None = None
    ) -> tuple[int, bytes] | None:
        """Return the session's cache ``name`` as ``(seq, data)``, or None when there is none
        (or no such session). With ``owner`` (app, user): SessionNotFoundError when there is
        no session of theirs under ``session_id`` (checked in the same query)."""
        ...

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        owner: tuple[str, str] | None = None,
    ) -> None:
        """Store (or replace) the session's cache ``name`` at ``seq`` (a cache: may be dropped;
        nothing is stored for a missing session or by a read-only store). With ``owner`` (app,
        user): SessionNotFoundError, nothing stored, when there is no session of theirs under
        ``session_id`` (a read-only store stores nothing and checks nothing)."""
        ...

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None,
        filename: str,
        mime_type: str,
        data: bytes,
        created_at: float,
        metadata: bytes | None = None,
    ) -> int:
        """Store a new version and return its number (one more than the newest stored, 0 for
        the first). ``session_id`` is the id the app gave the session (with app and user it
        names one; the session need not exist), None means user-scoped; ``metadata`` is kept
        with it."""
        ...

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        """Return the given version (latest when None), or None."""
        ...

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        """Return filename -> sorted versions for the scope."""
        ...

    async def index_memory(
        self, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
        rows: Sequence[MemoryRow], added_at: float,
    ) -> bool:
        """Record the session as remembered up to ``upto_seq`` and replace its memory rows with
        ``rows``, atomically. Returns False (nothing written) when the session does not exist."""
        ...

    async def search_memory(
        self, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
    ) -> list[MemoryRow]:
        """Return up to ``limit`` memory rows of the app's user with a word starting with any of
        ``terms`` (lower-case words), best match first. Never a row of another app or user."""
        ...

    async def remembered_sessions(self) -> list[tuple[str, str, str, int]]:
        """Return ``(session_id, app_name, user_id, upto_seq)`` of every remembered session,
        ordered by session id."""
        ...

    async def memory_rows(self, session_id: str) -> list[MemoryRow]:
        """Return the session's memory rows in ``seq`` order (empty when not remembered)."""
        ...

    async def clear_memory_rows(self) -> int:
        """Delete every memory row (derived data), keep which sessions are remembered; return
        how many rows were deleted."""
    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        """Return the artifact's versions oldest first, each with ``data`` empty (b"")."""
        ...

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        """Delete every version of the artifact; return how many there were."""
        ...

    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        """Return the events with ``seq <= upto`` whose timestamp is ``>= timestamp``, oldest
        first — only the newest ``newest`` of them when given. Raises SessionNotFoundError
        (``owner`` as in ``read``)."""
        ...

    async def list_sessions_by_update(
        self, *, app_name: str, user_id: str | None
    ) -> list[SessionRecord]:
        """Return the app's sessions (only the user's when ``user_id`` is set) ordered by
        ``updated_at``, then user id, then session id."""
        ...

    async def list_sessions_newest(
        self, *, app_name: str | None, user_id: str | None, id_contains: str | None,
        updated_since: float | None, before: tuple[float, str] | None, limit: int,
    ) -> list[SessionRecord]:
        """Return up to ``limit`` sessions matching every filter given, newest update first
        (ties: the greater session id first): of the app, of the user, whose id contains
        ``id_contains`` (ignoring the case of ASCII letters), updated at or after
        ``updated_since``, and ordered after ``before`` — the ``(updated_at, session_id)`` of
        the previous page's last session. One page is read, whatever the number of sessions."""
        ...

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        """Return the newest state snapshot of each session that has one still bound to its
        event (as ``load_snapshot``; sessions without one, or that do not exist, are left
        out)."""
        ...

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        """Return, for each session id of ``after``, its events with ``seq > after[id]`` oldest
        first, in one read (a session that does not exist maps to an empty list)."""
        ...

    async def read_shared_heads(
        self, *, app_name: str, user_ids: Sequence[str | None]
    ) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
        """Return, for each scope of the app (None: its ``app:`` stream, else the user's
        ``user:`` stream), its newest shared snapshot (or None) and its stream entries after
        that snapshot's ``count``, in stream order: the scopes' state at head, in one read
        however many scopes."""
        ...

    async def load_head_states(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        """Return the head state of each session that has one whose event at ``seq`` still
        has its ``chain_hash`` (others, and sessions that do not exist, are left out), in one
        read."""
        ...

    async def save_head_states(self, states: Mapping[str, HeadState]) -> None:
        """Store (or replace) each session's head state, in one write: only for a session
        whose event at ``seq`` has the state's ``chain_hash`` (so not for a session deleted,
        or deleted and made again, since the fold). A cache: a read-only store keeps none."""
        ...

    async def app_positions(self) -> list[tuple[str, int | None, int]]:
        """Return ``(app, counter, highest)`` for every app with shared-state events or stream
        entries, ordered by app: its ``evs_app_positions`` counter (None: no row) and the
        highest position its stored shared-state events and stream entries hold (derived from
        the log; the counter is never below it unless it was edited)."""
        ...

    async def wait_for_events(self, session_id: str, *, after: int, max_wait: float) -> None:
        """Return once the session may have events with ``seq > after``, or after ``max_wait``
        seconds. A wake-up only: callers re-read from their cursor."""
        ...

    async def aclose(self) -> None:
        """Release connections; further use raises StoreClosedError."""
        ...


def check_retry(
    session_id: str, events: Sequence[NewEvent], stored: dict[str, StoredEvent]
) -> list[StoredEvent] | None:
    """Classify a batch against the stored events with the same ids.

    Returns the stored envelopes when the whole batch is an identical retry, None when no id of
    the batch is stored; raises DuplicateEventError for a payload mismatch or a partial overlap.
    Shared by every backend so that all of them judge retries by one rule.
    """
    found: list[StoredEvent] = []
    missing: list[str] = []
    for event in events:
        prior = stored.get(event.event_id)
        if prior is None:
            missing.append(event.event_id)
            continue
        if not same_event(prior, event):
            raise DuplicateEventError(
                f"Event {event.event_id!r} is already stored in session {session_id!r} (seq "
                f"{prior.seq}) with a different payload; event ids cannot be reused.",
                session_id=session_id,
                event_id=event.event_id,
            )
        found.append(prior)
    if not found:
        return None
    if missing:
        raise DuplicateEventError(
            f"The batch overlaps session {session_id!r} only partly: event {found[0].event_id!r} "
            f"is stored but {missing[0]!r} is not; retry the exact batch or only new events.",
            session_id=session_id,
            event_id=missing[0],
        )
    return found


def fresh_key() -> str:
    """A new session key no session holds, for a session whose given id is another's key: a
    random value no app would give (every backend draws keys the same way)."""
    return f"~{uuid4().hex}"


def seal_artifact(signing_key: bytes | None, *, filename: str, version: int, mime_type: str,
                  created_at: float, metadata: bytes | None,
                  data: bytes) -> tuple[bytes, bytes | None]:
    """Return ``(digest, signature)`` of an artifact version's row as a backend stores them
    (``eventstore._chain.artifact_digest``; the signature None when unkeyed)."""
    digest = artifact_digest(filename, version=version, mime_type=mime_type,
                             created_at=created_at, metadata=metadata, data=data)
    return digest, None if signing_key is None else sign_artifact(signing_key, digest)


def artifact_problem(record: ArtifactRecord, signing_key: bytes | None) -> str | None:
    """Why the stored ``record`` is not the version its row's record vouches for, as a stable
    code (``artifact_edited``: its content no longer hashes to the stored digest;
    ``artifact_bad_signature``: keyed, the digest's signature is not the key's;
    ``artifact_unsigned``: keyed, it carries no signature; ``artifact_unverified``: it has no
    digest, saved before revision 0020), or None when it checks out."""
    if record.digest is None:
        return "artifact_unverified"
    try:
        digest = artifact_digest(record.filename, version=record.version,
                                 mime_type=record.mime_type, created_at=record.created_at,
                                 metadata=record.metadata, data=record.data)
    except (ValueError, TypeError):
        return "artifact_edited"
    if not compare_digest(digest, record.digest):
        return "artifact_edited"
    if signing_key is None:
        return None
    if record.signature is None:
        return "artifact_unsigned"
    if not compare_digest(sign_artifact(signing_key, digest), record.signature):
        return "artifact_bad_signature"
    return None


_REFUSED_ARTIFACTS = {
    "artifact_edited": "its bytes, MIME type, save time or metadata no longer hash to the "
                       "digest stored when it was saved",
    "artifact_bad_signature": "the signature of its record is not this key's",
}
"""The problems for which a keyed store serves no version, with their reason."""


def check_served_artifact(record: ArtifactRecord, signing_key: bytes | None, *,
                          scope: str | None) -> None:
    """Raise TamperedArtifactError (``scope``: the session id the artifact is under, None for
    the user's) when a keyed store must not serve ``record``: ``artifact_problem`` says it was
    edited or its signature is not the key's. Unkeyed, or an unsigned version (saved before
    the key), it is served; ``evs verify`` reports those."""
    if signing_key is None:
        return
    problem = artifact_problem(record, signing_key)
    if problem in _REFUSED_ARTIFACTS:
        raise TamperedArtifactError(scope, record.filename, record.version,
                                    reason=_REFUSED_ARTIFACTS[problem])


def seal_fork_link(signing_key: bytes | None, link: ForkLink) -> tuple[bytes, bytes | None]:
    """Return ``(link_hash, signature)`` of a fork link's row as a backend stores them
    (``eventstore._chain.fork_link_digest`` of the link, its ``session_id`` the fork's key;
    the signature None when unkeyed)."""
    digest = fork_link_digest(link.session_id, link.origin_session_id, link.origin_seq,
                              link.forked_at)
    return digest, None if signing_key is None else sign_fork_link(signing_key, digest)


def check_artifact_version(session_id: str, artifact: NewArtifact, version: int) -> None:
    """Raise ArtifactConflictError when ``artifact`` was stored as ``version``, not as the
    version it carries (every backend judges this by one rule, inside its transaction)."""
    if version != artifact.version:
        raise ArtifactConflictError(session_id, artifact.filename,
                                    expected_version=artifact.version, actual_version=version)
def same_event(stored: StoredEvent, event: NewEvent) -> bool:
    """Whether ``event`` is the event ``stored`` holds: same payload and the same envelope
    fields the payload does not repeat (author, invocation id, timestamp, kind, schema
    version). An event stored by an older schema version compares unequal to its re-encoding
    by this one, so retrying across such an upgrade raises DuplicateEventError."""
    return (
        stored.payload == event.payload
        and stored.schema_version == event.schema_version
        and stored.timestamp == event.timestamp
        and stored.author == event.author
        and stored.invocation_id == event.invocation_id
        and stored.kind == event.kind
    )


def check_batch_ids(session_id: str, events: Sequence[NewEvent]) -> None:
    """Raise DuplicateEventError when one batch repeats an event id."""
    if len(events) < 2:
        return
    seen: set[str] = set()
    for event in events:
        if event.event_id in seen:
            raise DuplicateEventError(
                f"Event id {event.event_id!r} appears twice in one batch for session "
                f"{session_id!r}.",
                session_id=session_id,
                event_id=event.event_id,
            )
        seen.add(event.event_id)


def new_event(event_id: str, kind: str, invocation_id: str, author: str, timestamp: float,
              shared_state: bool, schema_version: int, payload: bytes,
              app_delta: bytes | None = None, user_delta: bytes | None = None) -> NewEvent:
    """A ``NewEvent`` with these fields, filled in directly like ``written`` (every append
    builds one per event on the event loop's thread)."""
    new = _new_object(NewEvent)
    _put(new, "event_id", event_id)
    _put(new, "kind", kind)
    _put(new, "invocation_id", invocation_id)
    _put(new, "author", author)
    _put(new, "timestamp", timestamp)
    _put(new, "shared_state", shared_state)
    _put(new, "schema_version", schema_version)
    _put(new, "payload", payload)
    _put(new, "app_delta", app_delta)
    _put(new, "user_delta", user_delta)
    return new


def written(session_id: str, event: NewEvent, *, seq: int, position: int,
            chain_hash: bytes | None = None, signature: bytes | None = None) -> StoredEvent:
    """The envelope of ``event`` as just written at ``seq``/``position`` (every backend builds
    the StoredEvents an append returns with this, so all of them return the same fields).

    Filled in directly rather than through the frozen dataclass's keyword ``__init__`` (which
    sets each field with ``object.__setattr__`` after binding keywords): the group commit
    builds one per event on the writer thread, under the GIL the event loop needs too."""
    stored = _new_object(StoredEvent)
    _put(stored, "session_id", session_id)
    _put(stored, "seq", seq)
    _put(stored, "position", position)
    _put(stored, "event_id", event.event_id)
    _put(stored, "kind", event.kind)
    _put(stored, "invocation_id", event.invocation_id)
    _put(stored, "author", event.author)
    _put(stored, "timestamp", event.timestamp)
    _put(stored, "shared_state", event.shared_state)
    _put(stored, "schema_version", event.schema_version)
    _put(stored, "payload", event.payload)
    _put(stored, "chain_hash", chain_hash)
    _put(stored, "signature", signature)
    _put(stored, "damage", None)
    return stored


_new_object = object.__new__
_put = object.__setattr__
