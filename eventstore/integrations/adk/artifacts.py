"""google-adk's ``BaseArtifactService`` on the event store (imported only with ``[adk]``).

Every save is a new version row (0, 1, 2 …) in the store's artifact table, scoped to the session,
or to the user for ``user:`` filenames and for saves without a session. How an ADK part is kept:

- ``inline_data`` (bytes + MIME type, nothing else): the bytes and the MIME type, as they are;
- ``text``: the UTF-8 bytes with ``text/plain``, marked as text;
- anything else (file data, references, an inline blob with a display name …): the part's JSON,
  marked as a part. An ``artifact://`` reference is followed on load, as ADK's services do.

The marks live under the key ``_adk`` of the version's stored metadata and never show in
``custom_metadata``, which holds exactly what the caller gave.

As ADK's own artifact services do, every call refuses with ``InputValidationError`` an app,
user or session id that ADK's ``validate_path_segment`` refuses (empty, null bytes, absolute,
drive-qualified, ``..``, reserved segments such as ``/sessions/``), a save refuses an
``artifact://`` reference that is malformed or leaves the caller's app, user or session, and a
load answers None for the part ADK's session rewind saves to remove an artifact.
"""

from __future__ import annotations

import os
from typing import Any

from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import (
    ArtifactVersion,
    BaseArtifactService,
    ensure_part,
)
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types
from typing_extensions import override

from eventstore import ArtifactNotFoundError, EventStore
from eventstore import ArtifactVersion as StoreVersion

from .._handle import StoreHandle

__all__ = ["EventStoreArtifactService"]

_MARK = "_adk"
_MAX_DEPTH = 10
_PART_MIME = "application/vnd.adk.part+json"
"""The stored MIME type of a part kept as JSON that names none itself (ADK shows none)."""
_REWIND_MARK = types.Part(inline_data=types.Blob(mime_type="application/octet-stream", data=b""))
"""What ADK's rewind saves over an artifact that did not exist at the rewind point; ADK's own
services load it as absent."""


def _check_ids(app_name: str, user_id: str, session_id: str | None, filename: str | None) -> None:
    """Refuse the ids ADK's artifact services refuse, so that an id valid here is valid there
    and the ``artifact://`` URIs that name it parse back to the same scope."""
    artifact_util.validate_path_segment(app_name, "app_name")
    artifact_util.validate_path_segment(user_id, "user_id")
    if session_id is not None and not (filename or "").startswith("user:"):
        artifact_util.validate_path_segment(session_id, "session_id")


def _check_reference(part: types.Part, app_name: str, user_id: str,
                     session_id: str | None) -> None:
    """Refuse on save a reference ADK would refuse to follow on load, as its services do."""
    if not artifact_util.is_artifact_ref(part):
        return
    assert part.file_data is not None
    parsed = artifact_util.parse_artifact_uri(part.file_data.file_uri or "")
    if parsed is None:
        raise InputValidationError(f"Invalid artifact reference URI: {part.file_data.file_uri}")
    artifact_util.validate_artifact_reference_scope(
        app_name=app_name, user_id=user_id, session_id=session_id, parsed_uri=parsed
    )


def _encode(part: types.Part) -> tuple[bytes, str, dict[str, Any] | None]:
    """``(bytes, mime type, mark)`` of an ADK part (see the module docstring)."""
    blob = part.inline_data
    only_blob = part.model_dump(exclude_none=True).keys() == {"inline_data"}
    if blob is not None and only_blob and blob.model_dump(exclude_none=True).keys() <= {
        "data", "mime_type"
    } and blob.mime_type is not None:
        return blob.data or b"", blob.mime_type, None
    if part.text is not None and part.model_dump(exclude_none=True).keys() == {"text"}:
        return part.text.encode(), "text/plain", {"kind": "text"}
    if blob is not None:
        mime = blob.mime_type
    else:
        mime = part.file_data.mime_type if part.file_data is not None else None
    return part.model_dump_json(exclude_none=True).encode(), mime or _PART_MIME, {"kind": "part"}


def _decode(data: bytes, mime_type: str, mark: Any) -> types.Part:
    kind = mark.get("kind") if isinstance(mark, dict) else None
    if kind == "text":
        return types.Part(text=data.decode())
    if kind == "part":
        return types.Part.model_validate_json(data)
    return types.Part(inline_data=types.Blob(mime_type=mime_type, data=data))


def _uri(app_name: str, user_id: str, session_id: str | None, filename: str, version: int) -> str:
    where = "" if session_id is None or filename.startswith("user:") else (
        f"sessions/{session_id}/"
    )
    return f"evs://apps/{app_name}/users/{user_id}/{where}artifacts/{filename}/versions/{version}"


class EventStoreArtifactService(BaseArtifactService):
    """ADK's artifact service on the event store: versions, custom metadata, user-scoped
    artifacts without a session, delete.

    ``url_or_store`` as for ``EventStoreSessionService`` (pass the same store to both to keep
    sessions and artifacts in one database). Returns None / empty lists for what does not
    exist, as ADK's services do.
    """

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore = "memory://") -> None:
        self._handle = StoreHandle(url_or_store)

    @override
    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        _check_ids(app_name, user_id, session_id, filename)
        part = ensure_part(artifact)
        _check_reference(part, app_name, user_id, session_id)
        store = await self._handle.get()
        data, mime, mark = _encode(part)
        metadata = dict(custom_metadata or {})
        if mark is not None:
            metadata[_MARK] = mark
        return await store.save_artifact(
            session_id, filename, data, mime_type=mime, app_name=app_name, user_id=user_id,
            metadata=metadata or None,
        )

    @override
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        _check_ids(app_name, user_id, session_id, filename)
        store = await self._handle.get()
        for depth in range(_MAX_DEPTH, 0, -1):
            try:
                found = await store.load_artifact(
                    session_id, filename, version=version, app_name=app_name, user_id=user_id
                )
            except ArtifactNotFoundError:
                return None
            part = _decode(found.data, found.mime_type, found.metadata.get(_MARK))
            if not artifact_util.is_artifact_ref(part):
                return None if part in (types.Part(), _REWIND_MARK) else part
            assert part.file_data is not None
            assert part.file_data.file_uri is not None
            target = artifact_util.resolve_artifact_reference(
                file_uri=part.file_data.file_uri, app_name=app_name, user_id=user_id,
                session_id=session_id, remaining_depth=depth,
            )
            app_name, user_id = target.app_name, target.user_id
            session_id, filename, version = target.session_id, target.filename, target.version
        return None

    @override
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        _check_ids(app_name, user_id, session_id, None)
        store = await self._handle.get()
        return list(await store.list_artifacts(session_id, app_name=app_name, user_id=user_id))

    @override
    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        _check_ids(app_name, user_id, session_id, filename)
        store = await self._handle.get()
        await store.delete_artifact(session_id, filename, app_name=app_name, user_id=user_id)

    @override
    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        return [v.version for v in await self._versions(app_name, user_id, filename, session_id)]

    async def _versions(
        self, app_name: str, user_id: str, filename: str, session_id: str | None
    ) -> list[StoreVersion]:
        _check_ids(app_name, user_id, session_id, filename)
        store = await self._handle.get()
        return await store.artifact_versions(session_id, filename, app_name=app_name,
                                             user_id=user_id)

    def _adk_version(
        self, found: StoreVersion, app_name: str, user_id: str, session_id: str | None
    ) -> ArtifactVersion:
        metadata = {k: v for k, v in found.metadata.items() if k != _MARK}
        mark = found.metadata.get(_MARK)
        mime = None if found.mime_type == _PART_MIME else found.mime_type
        if isinstance(mark, dict) and mark.get("kind") == "text":
            mime = "text/plain"
        return ArtifactVersion(
            version=found.version,
            canonical_uri=_uri(app_name, user_id, session_id, found.filename, found.version),
            custom_metadata=metadata,
            create_time=found.created_at,
            mime_type=mime,
        )

    @override
    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        return [
            self._adk_version(v, app_name, user_id, session_id)
            for v in await self._versions(app_name, user_id, filename, session_id)
        ]

    @override
    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        versions = await self._versions(app_name, user_id, filename, session_id)
        if not versions:
            return None
        if version is None:
            return self._adk_version(versions[-1], app_name, user_id, session_id)
        for found in versions:
            if found.version == version:
                return self._adk_version(found, app_name, user_id, session_id)
        return None

    async def close(self) -> None:
        """Close the store if this service opened it from a URL."""
        await self._handle.close()
