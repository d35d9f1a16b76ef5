"""The database schema: the single definition, shared by every SQL backend and by alembic.

These SQLModel tables are alembic's ``target_metadata``; the hand-written revisions under
``eventstore/migrations/versions`` must produce exactly this (a test compares them). The
application never calls ``create_all``: ``evs db upgrade`` (alembic) creates and migrates.

The backends run their own SQL over the plain driver for the hot paths; this module only
describes tables, keys and indexes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

if TYPE_CHECKING:  # only alembic's names for its filter's arguments, not alembic itself
    from alembic.runtime.environment import NameFilterParentNames, NameFilterType

__all__ = [
    "AppPosition",
    "Artifact",
    "Event",
    "Retention",
    "ScopeEntry",
    "ScopeHead",
    "Session",
    "SessionFork",
    "SharedSnapshot",
    "Snapshot",
    "described_by_models",
    "metadata",
]

metadata = SQLModel.metadata
"""The metadata holding the ``evs_*`` tables (alembic's ``target_metadata``)."""

_UNMODELLED_PREFIX = "evs_memory"
"""The memory index (revision 0006): its tables (on SQLite an FTS5 table and the shadow tables
SQLite makes for it) have no SQLAlchemy model; ``tests/eventstore/test_memory_index.py`` checks
them."""


def described_by_models(
    name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
) -> bool:
    """Whether a schema object found in the database is one these models describe (alembic's
    ``include_name``): False for what the migrations create on purpose without a model — the
    memory index's tables and indexes, and SQLite's physical layout of the events (revision
    0012: the rowid column ``evs_events.id`` and the index ``uq_evs_events_row_key``). With it,
    ``alembic check`` on a database at head finds nothing, and ``alembic revision
    --autogenerate`` never proposes dropping them (and the data in them)."""
    table = name if type_ == "table" else parent_names.get("table_name")
    if (table or "").startswith(_UNMODELLED_PREFIX):
        return False
    if table == "evs_events":
        return not ((type_ == "column" and name == "id")
                    or (type_ == "index" and name == "uq_evs_events_row_key"))
    return True


_INTEGER_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""A 64-bit key; spelled INTEGER on SQLite, where an INTEGER PRIMARY KEY is the rowid."""


class Session(SQLModel, table=True):
    """One session: its identity. Version and last update are derived from its events."""

    __tablename__ = "evs_sessions"
    __table_args__ = (
        sa.Index("ix_evs_sessions_app_user", "app_name", "user_id", "session_id"),
        sa.Index("uq_evs_sessions_key", "session_key", unique=True),
        # Given id first: it also finds a session by the given id alone (``evs show ID``).
        sa.Index("uq_evs_sessions_given", "given_id", "app_name", "user_id", unique=True),
    )

    session_id: str = Field(sa_type=sa.String(255), primary_key=True)
    """The session's key, unique in the store, that its events, snapshots, caches and forks
    name: the id the app gave, unless another app or user held it then (revision 0014)."""
    given_id: str = Field(
        sa_column=sa.Column("given_id", sa.String(255), nullable=False, server_default="")
    )
    """The id the app gave the session, unique per (app, user) (revision 0014); what the
    store's API calls the session id."""
    session_key: int | None = Field(
        default=None,
        sa_column=sa.Column("session_key", _INTEGER_KEY, sa.Identity(), nullable=False),
    )
    """A small integer naming the session inside the database (the high bits of its events'
    ``row_key``); PostgreSQL draws it from an identity, SQLite takes the largest plus one."""
    app_name: str = Field(sa_type=sa.String(255), nullable=False)
    """Application the session belongs to."""
    user_id: str = Field(sa_type=sa.String(255), nullable=False)
    """User the session belongs to."""
    created_at: float = Field(sa_type=sa.Float(), nullable=False)
    """Creation time (seconds since the epoch)."""
    head_seq: int = Field(
        default=0,
        sa_column=sa.Column("head_seq", sa.Integer(), nullable=False, server_default="0"),
    )
    """The ``seq`` of the newest event appended (revision 0008): written with every append, so
    a log whose tail was deleted ends before its head (see ``eventstore._chain``)."""
    head_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The ``chain_hash`` of the newest event appended (NULL while the session has none)."""
    head_signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC of the session id, ``head_seq`` and ``head_hash`` when a keyed store wrote the head
    (so removing the tail and moving the head back needs the key), else NULL."""


class Event(SQLModel, table=True):
    """One stored event: the envelope columns and the encoded payload. Rows are never updated.

    The primary key ``row_key`` (``session_key << 32 | seq``) addresses a session's events in
    ``seq`` order and makes ``(session, seq)`` unique. On SQLite the table's rowid is a column
    ``id`` in commit order and ``row_key`` is unique through ``uq_evs_events_row_key``
    (revision 0012): appends of many sessions at once then write at the end of the table
    instead of splitting pages in its middle. Neither has a model here (physical layout only;
    ``tests/eventstore/test_sql_schema.py`` leaves them out of its comparison).
    """

    __tablename__ = "evs_events"
    __table_args__ = (
        sa.UniqueConstraint("session_id", "event_id", name="uq_evs_events_session_event"),
        # Partial: only the few events touching user:/app: state pay for this index. Unique: an
        # app's shared-state events never share a position (the fold of shared state relies on
        # it), and the database holds the backends to that.
        sa.Index(
            "uq_evs_events_shared",
            "app_name",
            "position",
            unique=True,
            sqlite_where=sa.text("shared_state"),
            postgresql_where=sa.text("shared_state"),
        ),
    )

    row_key: int = Field(
        sa_column=sa.Column("row_key", _INTEGER_KEY, primary_key=True, autoincrement=False)
    )
    """``session_key << 32 | seq``: the session's events in ``seq`` order."""
    position: int = Field(sa_type=sa.BigInteger(), nullable=False)
    """Orders the app's ``user:``/``app:`` state changes; see ``StoredEvent.position``."""
    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_events_session"
            ),
            nullable=False,
        )
    )
    """Owning session."""
    seq: int = Field(sa_type=sa.Integer(), nullable=False)
    """Position within the session: 1, 2, 3 … with no gap."""
    event_id: str = Field(sa_type=sa.String(255), nullable=False)
    """Event id, unique within the session."""
    kind: str = Field(sa_type=sa.String(64), nullable=False)
    """Stable kind name (a scan hint)."""
    invocation_id: str = Field(sa_type=sa.String(255), nullable=False)
    """Invocation that produced the event."""
    author: str = Field(sa_type=sa.String(255), nullable=False)
    """``user`` or an agent name."""
    timestamp: float = Field(sa_type=sa.Float(), nullable=False)
    """Event creation time."""
    shared_state: bool = Field(sa_type=sa.Boolean(), nullable=False)
    """Whether the ``user:``/``app:`` delta takes part in the app's shared fold (false on a fork's
    copy of such an event: see ``StoredEvent.shared_state``)."""
    app_name: str = Field(sa_type=sa.String(255), nullable=False)
    """The session's app (denormalized so shared-state reads need no join)."""
    user_id: str = Field(sa_type=sa.String(255), nullable=False)
    """The session's user (denormalized, as ``app_name``)."""
    schema_version: int = Field(sa_type=sa.Integer(), nullable=False)
    """Payload schema version."""
    payload: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The encoded event (orjson)."""
    chain_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """sha256 chaining this row to the previous one of its session (``eventstore._chain``;
    revision 0008 backfilled older rows). NULL only in a row written behind the store's back."""
    signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC-SHA256 of the session id and ``chain_hash`` under the signing key, when a keyed
    store wrote the row; NULL otherwise."""


class AppPosition(SQLModel, table=True):
    """The newest ``position`` handed to a shared-state event of an app. It only grows
    (deleting sessions leaves it), so a position is never handed out twice. Derived from the
    log: the largest position of the app's stored events is always a correct value for it
    (revision 0003 sets it so), since every event carries the counter as it was."""

    __tablename__ = "evs_app_positions"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """The app."""
    position: int = Field(sa_type=sa.BigInteger(), nullable=False)
    """Its newest shared-state event's position (every other event takes the current one)."""


class Snapshot(SQLModel, table=True):
    """A cache of session-scoped state at one ``seq``; droppable and rebuilt from the log."""

    __tablename__ = "evs_snapshots"

    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_snapshots_session"
            ),
            primary_key=True,
        )
    )
    """Owning session."""
    seq: int = Field(sa_type=sa.Integer(), primary_key=True)
    """The state is the fold of events ``1..seq``."""
    state: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The encoded state (orjson)."""
    chain_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The chain hash of the event at ``seq`` when it was folded (revision 0020: the row counts
    only while that event still has it; a row without one is never used)."""
    mac: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The row's HMAC under a keyed store's signing key, else NULL."""


class HeadState(SQLModel, table=True):
    """A cache of a session's own state at the newest seq a listing folded, one row per
    session (``eventstore.backends.protocol.HeadState``); droppable and rebuilt from the log."""

    __tablename__ = "evs_head_states"

    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_head_states_session"
            ),
            primary_key=True,
        )
    )
    """Owning session."""
    seq: int = Field(sa_type=sa.Integer(), nullable=False)
    """The state is the fold of events ``1..seq``."""
    chain_hash: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The chain hash of the event at ``seq`` when it was folded (the row counts only while
    that event still has it)."""
    state: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The encoded state (orjson)."""
    mac: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The row's HMAC under a keyed store's signing key, else NULL."""


class ScopeEntry(SQLModel, table=True):
    """One entry of a shared-state stream (revision 0015, ``eventstore._scopes``): the
    ``app:`` stream of an app (``user_id`` ``''``) or the ``user:`` stream of one of its users.
    Rows are never updated nor deleted; no foreign key names the origin session, whose
    deletion leaves them."""

    __tablename__ = "evs_scope_entries"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """The scope's app."""
    user_id: str = Field(sa_type=sa.String(255), primary_key=True)
    """The scope's user, or ``''`` for the app's ``app:`` stream."""
    stream_seq: int = Field(
        sa_column=sa.Column("stream_seq", sa.BigInteger(), primary_key=True, autoincrement=False)
    )
    """Place in the stream: 1, 2, 3 … with no gap."""
    position: int = Field(sa_type=sa.BigInteger(), nullable=False)
    """The origin event's app position (``evs_events.position``)."""
    session_id: str = Field(sa_type=sa.String(255), nullable=False)
    """The origin event's session (``evs_sessions.session_id``, which may be gone)."""
    seq: int = Field(sa_type=sa.Integer(), nullable=False)
    """The origin event's seq."""
    event_id: str = Field(sa_type=sa.String(255), nullable=False)
    """The origin event's id."""
    delta: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The scope's part of the event's state changes (encoded JSON)."""
    chain_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """sha256 chaining the entry to the stream's previous one (``eventstore._chain``)."""
    signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC of scope and ``chain_hash`` when a keyed store wrote it, else NULL."""


class ScopeHead(SQLModel, table=True):
    """The head record of a shared-state stream (revision 0015): its newest entry, so a
    removed tail shows; a stream's appends take their stream seqs from it."""

    __tablename__ = "evs_scope_heads"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """The scope's app."""
    user_id: str = Field(sa_type=sa.String(255), primary_key=True)
    """The scope's user, or ``''``."""
    head_seq: int = Field(sa_type=sa.BigInteger(), nullable=False)
    """The newest entry's stream seq."""
    head_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The newest entry's chain hash."""
    head_signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC of scope, ``head_seq`` and ``head_hash`` when a keyed store wrote it."""


class SharedSnapshot(SQLModel, table=True):
    """A cache of the ``app:`` state of an app (``user_id`` ``''``) or the ``user:`` state of
    one of its users: the fold of its stream's entries ``1..event_count`` (revision 0015);
    droppable and rebuilt from the stream."""

    __tablename__ = "evs_shared_snapshots"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """The app whose sessions' shared-state events are folded."""
    user_id: str = Field(sa_type=sa.String(255), primary_key=True)
    """The user whose ``user:`` state this is, or ``''`` for the app's ``app:`` state."""
    position: int = Field(sa_type=sa.BigInteger(), primary_key=True)
    """The app position of the newest entry the fold covers (found by position)."""
    event_count: int = Field(sa_type=sa.Integer(), nullable=False)
    """How many entries of the stream the fold covers: the stream seq of the newest."""
    state: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The encoded state (orjson)."""
    chain_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The chain hash of the stream's entry ``event_count`` when it was folded (revision 0020:
    the row counts only while that entry still has it at ``position``)."""
    mac: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The row's HMAC under a keyed store's signing key, else NULL."""


class Artifact(SQLModel, table=True):
    """One version of an artifact; ``session_scope`` is ``''`` for user-scoped artifacts."""

    __tablename__ = "evs_artifacts"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """Owning app."""
    user_id: str = Field(sa_type=sa.String(255), primary_key=True)
    """Owning user."""
    session_scope: str = Field(sa_type=sa.String(255), primary_key=True)
    """Owning session id, or ``''`` when the artifact is shared by the user's sessions."""
    filename: str = Field(sa_type=sa.String(512), primary_key=True)
    """Artifact filename."""
    version: int = Field(sa_type=sa.Integer(), primary_key=True)
    """Version: 0, 1, 2 …"""
    mime_type: str = Field(sa_type=sa.String(255), nullable=False)
    """MIME type given at save time."""
    data: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The bytes."""
    created_at: float = Field(sa_type=sa.Float(), nullable=False)
    """Save time."""
    custom_metadata: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """Custom metadata given at save time (an encoded JSON object), or NULL."""
    digest: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """``eventstore._chain.artifact_digest`` of the row (revision 0020; NULL: written by an
    older version, reported as unverified)."""
    signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC of ``digest`` when a keyed store saved it, else NULL."""


class SessionCache(SQLModel, table=True):
    """A named cache of state derived from a session's log at one ``seq`` (written by an
    integration through ``EventStore.save_cache``); droppable, rebuilt from the log, checked
    against it by its reader."""

    __tablename__ = "evs_session_caches"

    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_session_caches_session"
            ),
            primary_key=True,
        )
    )
    """Owning session."""
    name: str = Field(sa_type=sa.String(255), primary_key=True)
    """Which cache (one per reader, e.g. ``openai_agents.items``)."""
    seq: int = Field(sa_type=sa.Integer(), nullable=False)
    """The cache describes events ``1..seq``."""
    data: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The cache, in its reader's encoding."""


class ImportedChainLink(SQLModel, table=True):
    """The exporting store's chain hash and signature of one event ``evs import --force``
    imported: evidence of what the export said, kept beside the importing store's own chain
    (revision 0017). Written with the session, goes with it (ON DELETE CASCADE), never
    changed."""

    __tablename__ = "evs_imported_chain"

    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_imported_chain_session"
            ),
            primary_key=True,
        )
    )
    """The importing session."""
    seq: int = Field(sa_type=sa.Integer(), primary_key=True)
    """The event's seq (the same in the export and the session)."""
    chain_hash: bytes = Field(sa_type=sa.LargeBinary(), nullable=False)
    """The exporting store's chain hash of the event."""
    signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """The exporting store's signature of the event, if it was keyed."""
    origin_session_id: str = Field(sa_type=sa.String(255), nullable=False)
    """The session id the event was exported from (the signatures bind it)."""


class SessionFork(SQLModel, table=True):
    """The link of a fork to its origin (``EventStore.fork``). It goes with the fork (ON DELETE
    CASCADE) and outlives the origin: no foreign key names the origin, whose events the fork
    holds copies of."""

    __tablename__ = "evs_session_forks"
    __table_args__ = (
        sa.Index("ix_evs_session_forks_origin", "origin_session_id", "forked_at"),
    )

    session_id: str = Field(
        sa_column=sa.Column(
            "session_id",
            sa.String(255),
            sa.ForeignKey(
                "evs_sessions.session_id", ondelete="CASCADE", name="fk_evs_session_forks_session"
            ),
            primary_key=True,
        )
    )
    """The fork."""
    origin_session_id: str = Field(sa_type=sa.String(255), nullable=False)
    """The session it was forked from (may no longer exist)."""
    origin_seq: int = Field(sa_type=sa.Integer(), nullable=False)
    """The fork's events are the origin's 1..origin_seq."""
    forked_at: float = Field(sa_type=sa.Float(), nullable=False)
    """When the fork was made (seconds since the epoch)."""
    link_hash: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """``eventstore._chain.fork_link_digest`` of the row (revision 0020)."""
    signature: bytes | None = Field(default=None, sa_type=sa.LargeBinary(), nullable=True)
    """HMAC of ``link_hash`` when a keyed store made the fork, else NULL."""


class Retention(SQLModel, table=True):
    """An app's retention policy (``EventStore.set_retention``): configuration, not derived
    from the log; ``EventStore.prune`` by policy reads it."""

    __tablename__ = "evs_retention_policies"

    app_name: str = Field(sa_type=sa.String(255), primary_key=True)
    """The app."""
    older_than: float = Field(sa_type=sa.Float(), nullable=False)
    """Seconds: its sessions last updated longer ago are pruned."""
    archive: str | None = Field(default=None, sa_type=sa.Text(), nullable=True)
    """The archive directory, or NULL (the prune names one or keeps none, explicitly)."""
    set_at: float = Field(sa_type=sa.Float(), nullable=False)
    """When the policy was set (seconds since the epoch)."""
