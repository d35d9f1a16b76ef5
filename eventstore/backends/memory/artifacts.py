"""The in-memory backend's artifact versions, sealed as the SQL backends seal their rows."""

from __future__ import annotations

import dataclasses

from ..protocol import ArtifactRecord, seal_artifact
from .data import MemoryData

__all__ = ["ArtifactMethods"]


class ArtifactMethods(MemoryData):
    """Mixed into MemoryBackend: saving, loading, listing and deleting artifact versions."""

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
        """See ``Backend.save_artifact``."""
        self._check_open()
        versions = self._artifacts.setdefault((app_name, user_id, session_id, filename), [])
        record = self._artifact(
            filename=filename,
            version=versions[-1].version + 1 if versions else 0,
            mime_type=mime_type,
            data=bytes(data),
            created_at=created_at,
            metadata=metadata,
        )
        versions.append(record)
        return record.version

    def _artifact(self, *, filename: str, version: int, mime_type: str, data: bytes,
                  created_at: float, metadata: bytes | None) -> ArtifactRecord:
        """An artifact version's record, sealed as the SQL backends seal its row."""
        digest, signature = seal_artifact(self.signing_key, filename=filename, version=version,
                                          mime_type=mime_type, created_at=created_at,
                                          metadata=metadata, data=data)
        return ArtifactRecord(filename=filename, version=version, mime_type=mime_type,
                              data=data, created_at=created_at, metadata=metadata,
                              digest=digest, signature=signature)

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        """See ``Backend.load_artifact``."""
        self._check_open()
        versions = self._artifacts.get((app_name, user_id, session_id, filename), [])
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return next((r for r in versions if r.version == version), None)

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        """See ``Backend.list_artifacts``."""
        self._check_open()
        return {
            key[3]: [r.version for r in records]
            for key, records in sorted(self._artifacts.items(), key=lambda kv: kv[0][3])
            if key[:3] == (app_name, user_id, session_id) and records
        }

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        """See ``Backend.list_artifact_versions``."""
        self._check_open()
        versions = self._artifacts.get((app_name, user_id, session_id, filename), [])
        return [dataclasses.replace(r, data=b"") for r in versions]

    async def artifact_scopes(
        self, *, after: tuple[str, str, str | None] | None, limit: int
    ) -> list[tuple[str, str, str | None]]:
        """See ``Backend.artifact_scopes``."""
        self._check_open()

        def order(scope: tuple[str, str, str | None]) -> tuple[str, str, str]:
            return scope[0], scope[1], scope[2] or ""  # the user's first, as the SQL backends

        scopes = sorted({key[:3] for key, records in self._artifacts.items() if records},
                        key=order)
        return [s for s in scopes if after is None or order(s) > order(after)][:limit]

    async def store_artifact_seal(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int, digest: bytes, signature: bytes,
    ) -> bool:
        """See ``Backend.store_artifact_seal``."""
        self._check_open()
        versions = self._artifacts.get((app_name, user_id, session_id, filename), [])
        for n, record in enumerate(versions):
            if record.version == version:
                if record.signature is not None or record.digest not in (None, digest):
                    return False
                versions[n] = dataclasses.replace(record, digest=digest, signature=signature)
                return True
        return False

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        """See ``Backend.delete_artifact``."""
        self._check_open()
        return len(self._artifacts.pop((app_name, user_id, session_id, filename), []))
