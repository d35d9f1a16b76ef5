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
from ._events import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
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
    ArtifactConflictError,
    ArtifactNotFoundError,
    ConcurrencyError,
    CorruptEventError,
    CorruptSnapshotError,
    DuplicateEventError,
    EventStoreError,
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
from ._memory import MemoryBackend
from ._memory_service import MemoryEntry, MemoryRebuild, MemoryService
from ._open import DEFAULT_URL, open_store, resolve_url
from ._state import apply_delta, fold_state
from ._store import Artifact, ArtifactVersion, EventStore, Session, SessionInfo, SessionPage

__all__ = [
    "DEFAULT_URL",
    "MAX_JSON_DEPTH",
    "REQUEST_CONFIRMATION_FUNCTION",
    "SCHEMA_VERSION",
    "Artifact",
    "ArtifactConflictError",
    "ArtifactNotFoundError",
    "ArtifactRecord",
    "ArtifactRef",
    "ArtifactVersion",
    "Backend",
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
    "SchemaError",
    "SchemaOutdatedError",
    "Session",
    "SessionExistsError",
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
    "event_kind",
    "fold_state",
    "new_event_id",
    "open_store",
    "register_upcaster",
    "resolve_url",
    "sign_event",
]
