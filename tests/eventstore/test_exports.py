"""The public surface of ``eventstore``: exactly what ``__all__`` says, sorted."""

from __future__ import annotations

import inspect

import eventstore

PUBLIC = {
    "CLAIMED_BY_KEY",
    "CONFIRMATION_REQUIRED_KIND",
    "DEFERRED_CALLS_KEY",
    "RERUN_DECISION_KEY",
    "CallDecision",
    "CallLedger",
    "CallRecord",
    "Deferrals",
    "claim_event",
    "deferred_call_ids",
    "idempotency_key",
    "is_framework_record",
    "is_placeholder_response",
    "rerun_call_ids",
    "DEFAULT_URL",
    "REQUEST_CONFIRMATION_FUNCTION",
    "MAX_JSON_DEPTH",
    "PARENT_LINK_KEY",
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
    "PruneReport",
    "PrunedSession",
    "RetentionPolicy",
    "MemoryService",
    "NewEvent",
    "Part",
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
    "TamperedArtifactError",
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
}


def test_exports_all_is_exactly_the_public_surface() -> None:
    assert set(eventstore.__all__) == PUBLIC
    assert len(eventstore.__all__) == len(PUBLIC)


def _isort_key(name: str) -> tuple[int, str]:
    # isort-style order (ruff RUF022's default): CONSTANTS, then Classes, then functions.
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, name


def test_exports_all_is_sorted() -> None:
    assert eventstore.__all__ == sorted(eventstore.__all__, key=_isort_key)
    assert len(set(eventstore.__all__)) == len(eventstore.__all__)


def test_exports_every_name_resolves() -> None:
    for name in eventstore.__all__:
        assert getattr(eventstore, name) is not None, name


def test_exports_no_other_public_names() -> None:
    public = {
        name for name, value in vars(eventstore).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == PUBLIC


def test_exports_public_objects_are_documented() -> None:
    for name in eventstore.__all__:
        value = getattr(eventstore, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_exports_errors_share_one_root() -> None:
    errors = [getattr(eventstore, n) for n in eventstore.__all__ if n.endswith("Error")]
    assert errors
    for error in errors:
        assert issubclass(error, eventstore.EventStoreError), error
