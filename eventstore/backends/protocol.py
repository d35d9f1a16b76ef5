"""What a storage backend is: the protocol it implements (``Backend``), over the envelope
records it stores (``records``) and the rules every backend judges by (``rules``); both are
re-exported here, so a backend imports its contract from one place.

A backend sees stored envelopes — ids, ``seq``, a kind name, payload bytes — and never imports the
event classes or the codec. The store façade (``eventstore/store``) encodes and decodes; backends
(memory, SQLite, PostgreSQL) keep bytes. Every backend gives the same guarantees; the contract
suite in ``tests/eventstore`` checks them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from eventstore._fork import ForkLink, ForkPlan
from eventstore._retention import RetentionPolicy
from eventstore._scopes import ScopeEntry, ScopeHead

from .records import (
    ArtifactRecord,
    EventRow,
    HeadState,
    ImportedLink,
    ImportPage,
    ImportSource,
    MemoryRow,
    NewArtifact,
    NewEvent,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
    new_event,
    written,
)
from .rules import (
    artifact_problem,
    check_artifact_version,
    check_batch_ids,
    check_retry,
    check_served_artifact,
    fresh_key,
    same_event,
    seal_artifact,
    seal_fork_link,
)

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

    async def artifact_scopes(
        self, *, after: tuple[str, str, str | None] | None, limit: int
    ) -> list[tuple[str, str, str | None]]:
        """Return up to ``limit`` scopes holding artifact versions, as ``(app_name, user_id,
        session id the app gave, or None for the user's)``, ordered by app, user, then scope
        (the user's first), after the scope ``after`` (the previous page's last one)."""
        ...

    async def store_artifact_seal(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int, digest: bytes, signature: bytes,
    ) -> bool:
        """Seal one stored artifact version with ``digest`` and ``signature`` (``seal_artifact``
        of its content) where it has none: only when its signature is NULL and its digest is
        NULL or already ``digest`` (a digest is never replaced; the one conditional UPDATE
        writes only those two columns of that row, and no event row). Returns whether the
        version was sealed (False: no such version, or it is signed, or its stored digest is
        another, e.g. it was deleted and saved again meanwhile). A save of a new version at
        the same time is unaffected (another row)."""
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
