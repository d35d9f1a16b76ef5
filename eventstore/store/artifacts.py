"""The store façade's artifact methods: versioned blobs addressed by session or by user.

An artifact is named by ``(app, user, scope, filename)``: the scope is a session id, or the user
itself for ``user:``-prefixed filenames and for artifacts saved without a session. Callers name
the scope either by a stored session (its app and user are looked up) or directly with
``app_name`` and ``user_id`` (no session has to exist: what framework artifact services do).
Every save takes the next version (one more than the newest stored, 0 for the first) and may
carry custom metadata (a JSON object). Knows no SQL.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventstore._args import check_filename, check_int, check_str
from eventstore._codec import check_json_value
from eventstore._exceptions import ArtifactNotFoundError, InvalidEventError, StoreUsageError
from eventstore._state import USER_PREFIX
from eventstore.backends.protocol import (
    ArtifactRecord,
    check_served_artifact,
)

from .addressing import StoreBase

__all__ = ["Artifact", "ArtifactMethods", "ArtifactVersion"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """One version of an artifact."""

    filename: str
    """Filename (``user:`` prefix for user-scoped artifacts)."""
    version: int
    """Version number (0 for the first save)."""
    mime_type: str
    """MIME type given when it was saved."""
    data: bytes
    """The bytes."""
    created_at: float
    """Save time."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Custom metadata given when it was saved (empty when none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactVersion:
    """What is known of one stored version without loading its bytes."""

    filename: str
    """Filename."""
    version: int
    """Version number."""
    mime_type: str
    """MIME type given when it was saved."""
    created_at: float
    """Save time."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Custom metadata given when it was saved (empty when none)."""


def _metadata(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {}
    value = orjson.loads(raw)
    return value if isinstance(value, dict) else {}


def _encode_metadata(metadata: Mapping[str, Any] | None) -> bytes | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise StoreUsageError(
            f"Artifact metadata must be a mapping with string keys or None, not {metadata!r}."
        )
    try:
        # The rule events follow: NaN and inf (orjson writes null), big ints, lone surrogates.
        check_json_value(dict(metadata), path="metadata")
    except InvalidEventError as exc:
        raise StoreUsageError(f"Artifact metadata must hold JSON values only: {exc}") from exc
    try:
        return orjson.dumps(dict(metadata), option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # a nested mapping orjson does not take (not a dict)
        raise StoreUsageError(f"Artifact metadata must hold JSON values only: {exc}.") from exc


class ArtifactMethods(StoreBase):
    """Mixed into EventStore: the artifact half of its public API."""

    async def _artifact_scope(
        self,
        session_id: str | None,
        filename: str | None,
        app_name: str | None,
        user_id: str | None,
    ) -> tuple[str, str, str | None]:
        """Return ``(app_name, user_id, session scope or None for the user's artifacts)``."""
        self._open_backend()
        if filename is not None:
            check_filename(filename)
        if session_id is not None:
            check_str(session_id, "session_id")
        if app_name is None and user_id is None:
            if session_id is None:
                raise StoreUsageError(
                    "Name the artifact's scope: a session_id, or app_name and user_id."
                )
            record = await self._record(session_id)
            app_name, user_id = record.app_name, record.user_id
        elif app_name is None or user_id is None:
            raise StoreUsageError("app_name and user_id go together; give both or neither.")
        check_str(app_name, "app_name")
        check_str(user_id, "user_id")
        user_scoped = session_id is None or (
            filename is not None and filename.startswith(USER_PREFIX)
        )
        return app_name, user_id, None if user_scoped else session_id

    async def save_artifact(
        self,
        session_id: str | None,
        filename: str,
        data: bytes,
        *,
        mime_type: str,
        app_name: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """Store a new version of an artifact and return its version (0, 1, 2 …).

        ``user:``-prefixed filenames, and any artifact saved with ``session_id=None``, are
        shared by every session of the same app and user. Without ``app_name``/``user_id`` the
        session must exist (SessionNotFoundError). Record the version in an event's
        ``artifact_delta`` to tie it to the log. ``metadata`` (a JSON object) is kept with the
        version.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise StoreUsageError(f"Artifact data must be bytes, not {type(data).__name__}.")
        check_str(mime_type, "mime_type")
        encoded = _encode_metadata(metadata)
        app, user, scope = await self._artifact_scope(
            session_id, check_filename(filename), app_name, user_id
        )
        return await self._writable_backend().save_artifact(
            app_name=app,
            user_id=user,
            session_id=scope,
            filename=filename,
            mime_type=mime_type,
            data=bytes(data),
            created_at=time.time(),
            metadata=encoded,
        )

    async def load_artifact(
        self,
        session_id: str | None,
        filename: str,
        *,
        version: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> Artifact:
        """Return the latest (or the given) version; raises ArtifactNotFoundError."""
        check_int(version, "version", optional=True)
        app, user, scope = await self._artifact_scope(
            session_id, check_filename(filename), app_name, user_id
        )
        found = await self._open_backend().load_artifact(
            app_name=app, user_id=user, session_id=scope, filename=filename, version=version
        )
        if found is None:
            raise ArtifactNotFoundError(session_id, filename, version)
        check_served_artifact(found, self._open_backend().signing_key, scope=scope)
        return Artifact(
            filename=found.filename,
            version=found.version,
            mime_type=found.mime_type,
            data=found.data,
            created_at=found.created_at,
            metadata=_metadata(found.metadata),
        )

    async def list_artifacts(
        self,
        session_id: str | None,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, list[int]]:
        """Return filename -> versions of the session's artifacts and its user's, sorted by
        filename (only the user's when ``session_id`` is None)."""
        app, user, scope = await self._artifact_scope(session_id, None, app_name, user_id)
        backend = self._open_backend()
        found = await backend.list_artifacts(app_name=app, user_id=user, session_id=None)
        if scope is not None:
            found.update(await backend.list_artifacts(app_name=app, user_id=user,
                                                      session_id=scope))
        return dict(sorted(found.items()))

    async def artifact_versions(
        self,
        session_id: str | None,
        filename: str,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[ArtifactVersion]:
        """Return every stored version of the artifact, oldest first, without the bytes (an
        empty list when there is none)."""
        app, user, scope = await self._artifact_scope(
            session_id, check_filename(filename), app_name, user_id
        )
        records: list[ArtifactRecord] = await self._open_backend().list_artifact_versions(
            app_name=app, user_id=user, session_id=scope, filename=filename
        )
        return [
            ArtifactVersion(filename=r.filename, version=r.version, mime_type=r.mime_type,
                            created_at=r.created_at, metadata=_metadata(r.metadata))
            for r in records
        ]

    async def delete_artifact(
        self,
        session_id: str | None,
        filename: str,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> int:
        """Delete every version of the artifact and return how many there were (0 when there
        was none). The next save starts again at version 0. Artifacts are not events: this
        changes no event, and events that referenced a deleted version keep the reference."""
        app, user, scope = await self._artifact_scope(
            session_id, check_filename(filename), app_name, user_id
        )
        return await self._writable_backend().delete_artifact(
            app_name=app, user_id=user, session_id=scope, filename=filename
        )
