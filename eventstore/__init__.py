"""agent-eventstore: an append-only, per-session event log for LLM agents that call tools.

Open a store with ``open_store(url)``; append events with ``expected_version``; read forward,
backward and live; state is the fold of the log; artifacts are versioned.
"""

from ._backend import ArtifactRecord, Backend, NewEvent, SessionRecord, StoredEvent
from ._codec import SCHEMA_VERSION, EventKind, event_kind, register_upcaster
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
    ArtifactNotFoundError,
    ConcurrencyError,
    CorruptEventError,
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
)
from ._memory import MemoryBackend
from ._open import DEFAULT_URL, open_store, resolve_url
from ._state import apply_delta, fold_state
from ._store import Artifact, ArtifactVersion, EventStore, Session, SessionInfo, SessionPage

__all__ = [
    "DEFAULT_URL",
    "REQUEST_CONFIRMATION_FUNCTION",
    "SCHEMA_VERSION",
    "Artifact",
    "ArtifactNotFoundError",
    "ArtifactRecord",
    "ArtifactRef",
    "ArtifactVersion",
    "Backend",
    "ConcurrencyError",
    "Content",
    "CorruptEventError",
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
    "ToolConfirmation",
    "apply_delta",
    "event_kind",
    "fold_state",
    "new_event_id",
    "open_store",
    "register_upcaster",
    "resolve_url",
]
