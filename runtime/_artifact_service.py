"""``StoreArtifactService``: one session's ``ArtifactService`` over the store's versioned artifacts.

What a tool saves or loads through ``ToolContext`` (and ``load_artifacts`` lists) during a run is
the store's: versions are appended and read there, so any process sees them.
"""

from __future__ import annotations

from eventstore import ArtifactNotFoundError, EventStore

__all__ = ["StoreArtifactService"]


class StoreArtifactService:
    """The ``ArtifactService`` of one session over the store's versioned artifacts.

    ``app_name``/``user_id`` address the session when given (needed when several apps or users
    hold its id)."""

    def __init__(self, store: EventStore, session_id: str, *, app_name: str | None = None,
                 user_id: str | None = None) -> None:
        self._store = store
        self._session_id = session_id
        self._app_name = app_name
        self._user_id = user_id

    async def save(self, filename: str, data: bytes, mime_type: str) -> int:
        """Save a new version in the store and return it."""
        return await self._store.save_artifact(
            self._session_id, filename, data, mime_type=mime_type, app_name=self._app_name,
            user_id=self._user_id,
        )

    async def load(self, filename: str, version: int | None = None) -> bytes | None:
        """Return the bytes of a version (newest by default), ``None`` when absent."""
        try:
            found = await self._store.load_artifact(self._session_id, filename, version=version,
                                                    app_name=self._app_name,
                                                    user_id=self._user_id)
        except ArtifactNotFoundError:
            return None
        return found.data

    async def list(self) -> list[str]:
        """Return the session's and its user's artifact filenames, sorted."""
        return sorted(await self._store.list_artifacts(
            self._session_id, app_name=self._app_name, user_id=self._user_id))

    async def latest_versions(self) -> dict[str, int]:
        """Return filename -> newest version of the session's and its user's artifacts."""
        listed = await self._store.list_artifacts(
            self._session_id, app_name=self._app_name, user_id=self._user_id)
        return {name: max(versions) for name, versions in sorted(listed.items()) if versions}
