"""agent-eventstore: an append-only, per-session event log for LLM agents that call tools.

Open a store with ``open_store(url)``; append events with ``expected_version``; read forward,
backward and live; state is the fold of the log; artifacts are versioned.
"""

from ._backend import ArtifactRecord, Backend, MemoryRow, NewEvent, SessionRecord, StoredEvent
from ._chain import sign_event
from ._codec import (
    MAX_JSON_DEPTH,
    SCHEMA_VERSION,
    EventKind,
    check_json_value,
    event_kind,
    register_upcaster,
)
from ._compacted import CompactedHistory
from ._events import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
    Compaction,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    new_event_id,
)
from ._exceptions import (
    AmbiguousSessionError,
    ArchiveError,
    ArtifactConflictError,
    ArtifactNotFoundError,
    ConcurrencyError,
    CorruptEventError,
    CorruptSnapshotError,
    DuplicateEventError,
    EventStoreError,
    ForkPointError,
    InvalidEventError,
    SchemaError,
    SchemaOutdatedError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreClosedError,
    StoreUsageError,
    TamperedLogError,
)
from ._fork import ForkLink, SessionForks
from ._links import PARENT_LINK_KEY, child_session_id, parent_link
from ._memory import MemoryBackend
from ._memory_service import MemoryEntry, MemoryRebuild, MemoryService
from ._open import DEFAULT_URL, open_store, resolve_url
from ._retention import PrunedSession, PruneReport, RetentionPolicy
from ._state import apply_delta, fold_state
from ._store import Artifact, ArtifactVersion, EventStore, Session, SessionInfo, SessionPage

__all__ = [
    "DEFAULT_URL",
    "MAX_JSON_DEPTH",
    "PARENT_LINK_KEY",
    "REQUEST_CONFIRMATION_FUNCTION",
    "SCHEMA_VERSION",
    "AmbiguousSessionError",
    "ArchiveError",
    "Artifact",
    "ArtifactConflictError",
    "ArtifactNotFoundError",
    "ArtifactRecord",
    "ArtifactRef",
    "ArtifactVersion",
    "Backend",
    "CompactedHistory",
    "Compaction",
    "ConcurrencyError",
    "Content",
    "CorruptEventError",
    "CorruptSnapshotError",
    "DuplicateEventError",
    "Event",
    "EventActions",
    "EventKind",
    "EventStore",
    "EventStoreError",
    "ForkLink",
    "ForkPointError",
    "FunctionCall",
    "FunctionResponse",
    "InvalidEventError",
    "MemoryBackend",
    "MemoryEntry",
    "MemoryRebuild",
    "MemoryRow",
    "MemoryService",
    "NewEvent",
    "Part",
    "PruneReport",
    "PrunedSession",
    "RetentionPolicy",
    "SchemaError",
    "SchemaOutdatedError",
    "Session",
    "SessionExistsError",
    "SessionForks",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionPage",
    "SessionRecord",
    "StorageError",
    "StoreClosedError",
    "StoreUsageError",
    "StoredEvent",
    "TamperedLogError",
    "ToolConfirmation",
    "apply_delta",
    "check_json_value",
    "child_session_id",
    "event_kind",
    "fold_state",
    "new_event_id",
    "open_store",
    "parent_link",
    "register_upcaster",
    "resolve_url",
    "sign_event",
]
