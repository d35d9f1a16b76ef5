"""The SQLite backend's artifact jobs: plain functions of a connection, run on a driver thread.

An artifact version is one row of ``evs_artifacts``; a save takes the next version (0, 1, 2 …)
inside the writer's ``BEGIN IMMEDIATE`` transaction, so concurrent saves never collide.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ._backend import ArtifactRecord

__all__ = ["ArtifactKey", "list_versions", "load", "save"]

ArtifactKey = tuple[str, str, str, str]
"""``(app_name, user_id, session_scope, filename)``: the columns naming one artifact."""

_WHERE = "app_name = ? AND user_id = ? AND session_scope = ? AND filename = ?"


def save(
    conn: sqlite3.Connection, key: ArtifactKey, *, mime_type: str, data: bytes, created_at: float
) -> int:
    """Insert the next version of the artifact ``key`` names and return its number."""
    row = conn.execute(
        "INSERT INTO evs_artifacts (app_name, user_id, session_scope, filename, version, "
        "mime_type, data, created_at) "
        f"SELECT ?, ?, ?, ?, coalesce(max(version) + 1, 0), ?, ?, ? FROM evs_artifacts "
        f"WHERE {_WHERE} RETURNING version",
        (*key, mime_type, data, created_at, *key),
    ).fetchone()
    return int(row[0])


def load(conn: sqlite3.Connection, key: ArtifactKey, version: int | None) -> ArtifactRecord | None:
    """Return version ``version`` of the artifact (the newest when None), or None."""
    params: tuple[Any, ...]
    if version is None:
        sql, params = f"{_WHERE} ORDER BY version DESC LIMIT 1", key
    else:
        sql, params = f"{_WHERE} AND version = ?", (*key, version)
    row = conn.execute(
        f"SELECT version, mime_type, data, created_at FROM evs_artifacts WHERE {sql}", params
    ).fetchone()
    if row is None:
        return None
    return ArtifactRecord(filename=key[3], version=row[0], mime_type=row[1], data=bytes(row[2]),
                          created_at=row[3])


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
