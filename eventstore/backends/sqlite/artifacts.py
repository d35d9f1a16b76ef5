"""The SQLite backend's artifact jobs: plain functions of a connection, run on a driver thread.

An artifact version is one row of ``evs_artifacts``; a save takes the next version (0, 1, 2 …)
inside the writer's ``BEGIN IMMEDIATE`` transaction, so concurrent saves never collide.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from eventstore.backends.protocol import ArtifactRecord, seal_artifact
from eventstore.backends.sql import SEAL_ARTIFACT_SQL, artifact_seal_params

__all__ = ["ArtifactKey", "delete", "list_versions", "load", "save", "seal", "versions"]

ArtifactKey = tuple[str, str, str, str]
"""``(app_name, user_id, session_scope, filename)``: the columns naming one artifact."""

_WHERE = "app_name = ? AND user_id = ? AND session_scope = ? AND filename = ?"


def save(
    conn: sqlite3.Connection,
    key: ArtifactKey,
    *,
    mime_type: str,
    data: bytes,
    created_at: float,
    metadata: bytes | None = None,
    signing_key: bytes | None = None,
) -> int:
    """Insert the next version of the artifact ``key`` names, with its digest (and, keyed,
    signature: ``seal_artifact``), and return its number."""
    version = int(conn.execute(
        f"SELECT coalesce(max(version) + 1, 0) FROM evs_artifacts WHERE {_WHERE}", key
    ).fetchone()[0])
    digest, signature = seal_artifact(signing_key, filename=key[3], version=version,
                                      mime_type=mime_type, created_at=created_at,
                                      metadata=metadata, data=data)
    conn.execute(
        "INSERT INTO evs_artifacts (app_name, user_id, session_scope, filename, version, "
        "mime_type, data, created_at, custom_metadata, digest, signature) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*key, version, mime_type, data, created_at, metadata, digest, signature),
    )
    return version


def load(conn: sqlite3.Connection, key: ArtifactKey, version: int | None) -> ArtifactRecord | None:
    """Return version ``version`` of the artifact (the newest when None), or None."""
    params: tuple[Any, ...]
    if version is None:
        sql, params = f"{_WHERE} ORDER BY version DESC LIMIT 1", key
    else:
        sql, params = f"{_WHERE} AND version = ?", (*key, version)
    row = conn.execute(
        "SELECT version, mime_type, data, created_at, custom_metadata, digest, signature "
        f"FROM evs_artifacts WHERE {sql}", params
    ).fetchone()
    if row is None:
        return None
    return ArtifactRecord(filename=key[3], version=row[0], mime_type=row[1], data=bytes(row[2]),
                          created_at=row[3], metadata=None if row[4] is None else bytes(row[4]),
                          digest=None if row[5] is None else bytes(row[5]),
                          signature=None if row[6] is None else bytes(row[6]))


def versions(conn: sqlite3.Connection, key: ArtifactKey) -> list[ArtifactRecord]:
    """Return every version of the artifact, oldest first, without its bytes."""
    return [
        ArtifactRecord(filename=key[3], version=row[0], mime_type=row[1], data=b"",
                       created_at=row[2], metadata=None if row[3] is None else bytes(row[3]))
        for row in conn.execute(
            "SELECT version, mime_type, created_at, custom_metadata FROM evs_artifacts "
            f"WHERE {_WHERE} ORDER BY version", key
        )
    ]


def seal(conn: sqlite3.Connection, key: ArtifactKey, version: int, *, digest: bytes,
         signature: bytes) -> bool:
    """Store the seal of an unsigned version (``Backend.store_artifact_seal``); return whether
    its row was sealed."""
    return conn.execute(SEAL_ARTIFACT_SQL,
                        artifact_seal_params(key, version, digest, signature)).rowcount == 1


def delete(conn: sqlite3.Connection, key: ArtifactKey) -> int:
    """Delete every version of the artifact; return how many rows went."""
    return conn.execute(f"DELETE FROM evs_artifacts WHERE {_WHERE}", key).rowcount


def list_versions(
    conn: sqlite3.Connection, app_name: str, user_id: str, session_scope: str
) -> dict[str, list[int]]:
    """Return every filename of the scope with its versions, oldest first."""
    found: dict[str, list[int]] = {}
    for filename, version in conn.execute(
        "SELECT filename, version FROM evs_artifacts WHERE app_name = ? AND user_id = ? "
        "AND session_scope = ? ORDER BY filename, version",
        (app_name, user_id, session_scope),
    ):
        found.setdefault(filename, []).append(version)
    return found
