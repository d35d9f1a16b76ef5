"""The PostgreSQL backend's artifact queries: coroutines of an asyncpg connection.

An artifact version is one row of ``evs_artifacts``. ``save`` takes the next version (0, 1,
2 …); the caller holds the artifact's advisory lock for the transaction, so concurrent saves
never collide.
"""

from __future__ import annotations

from typing import Any

from eventstore.backends.protocol import ArtifactRecord, seal_artifact
from eventstore.backends.sql import SEAL_ARTIFACT_SQL, artifact_seal_params
from eventstore.backends.sql.base import numbered

__all__ = ["ArtifactKey", "delete", "list_versions", "load", "save", "seal", "versions"]

ArtifactKey = tuple[str, str, str, str]
"""``(app_name, user_id, session_scope, filename)``: the columns naming one artifact."""

_WHERE = "app_name = $1 AND user_id = $2 AND session_scope = $3 AND filename = $4"


async def save(
    conn: Any,
    key: ArtifactKey,
    *,
    mime_type: str,
    data: bytes,
    created_at: float,
    metadata: bytes | None = None,
    signing_key: bytes | None = None,
) -> int:
    """Insert the next version of the artifact ``key`` names, with its digest (and, keyed,
    signature: ``seal_artifact``), and return its number (the caller holds the artifact's
    lock, so the version read stays the next one)."""
    version = int(await conn.fetchval(
        f"SELECT coalesce(max(version) + 1, 0) FROM evs_artifacts WHERE {_WHERE}", *key))
    digest, signature = seal_artifact(signing_key, filename=key[3], version=version,
                                      mime_type=mime_type, created_at=created_at,
                                      metadata=metadata, data=data)
    await conn.execute(
        "INSERT INTO evs_artifacts (app_name, user_id, session_scope, filename, version, "
        "mime_type, data, created_at, custom_metadata, digest, signature) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bytea, $10, $11)",
        *key, version, mime_type, data, created_at, metadata, digest, signature,
    )
    return version


async def load(conn: Any, key: ArtifactKey, version: int | None) -> ArtifactRecord | None:
    """Return version ``version`` of the artifact (the newest when None), or None."""
    sql = ("SELECT version, mime_type, data, created_at, custom_metadata, digest, signature "
           f"FROM evs_artifacts WHERE {_WHERE} ")
    if version is None:
        row = await conn.fetchrow(sql + "ORDER BY version DESC LIMIT 1", *key)
    else:
        row = await conn.fetchrow(sql + "AND version = $5", *key, version)
    if row is None:
        return None
    return ArtifactRecord(filename=key[3], version=row[0], mime_type=row[1], data=bytes(row[2]),
                          created_at=row[3], metadata=None if row[4] is None else bytes(row[4]),
                          digest=None if row[5] is None else bytes(row[5]),
                          signature=None if row[6] is None else bytes(row[6]))


async def versions(conn: Any, key: ArtifactKey) -> list[ArtifactRecord]:
    """Return every version of the artifact, oldest first, without its bytes."""
    return [
        ArtifactRecord(filename=key[3], version=row[0], mime_type=row[1], data=b"",
                       created_at=row[2], metadata=None if row[3] is None else bytes(row[3]))
        for row in await conn.fetch(
            "SELECT version, mime_type, created_at, custom_metadata FROM evs_artifacts "
            f"WHERE {_WHERE} ORDER BY version", *key
        )
    ]


async def seal(conn: Any, key: ArtifactKey, version: int, *, digest: bytes,
               signature: bytes) -> bool:
    """Store the seal of an unsigned version (``Backend.store_artifact_seal``); return whether
    its row was sealed (the UPDATE's row lock orders it with a delete of the row)."""
    status = await conn.execute(numbered(SEAL_ARTIFACT_SQL),
                                *artifact_seal_params(key, version, digest, signature))
    return bool(status.split()[-1] == "1")


async def delete(conn: Any, key: ArtifactKey) -> int:
    """Delete every version of the artifact; return how many rows went."""
    status = await conn.execute(f"DELETE FROM evs_artifacts WHERE {_WHERE}", *key)
    return int(status.split()[-1])


async def list_versions(
    conn: Any, app_name: str, user_id: str, session_scope: str
) -> dict[str, list[int]]:
    """Return every filename of the scope with its versions, oldest first."""
    found: dict[str, list[int]] = {}
    for row in await conn.fetch(
        "SELECT filename, version FROM evs_artifacts WHERE app_name = $1 AND user_id = $2 "
        "AND session_scope = $3 ORDER BY filename, version",
        app_name, user_id, session_scope,
    ):
        found.setdefault(row[0], []).append(row[1])
    return found
