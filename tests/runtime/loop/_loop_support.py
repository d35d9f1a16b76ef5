"""Stores for the loop tests: memory, and a SQLite file once the SQLite backend exists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from eventstore import EventStore, open_store

HAS_SQLITE = importlib.util.find_spec("eventstore.backends.sqlite.base") is not None

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param(
        "sqlite",
        id="sqlite",
        marks=pytest.mark.skipif(not HAS_SQLITE, reason="the SQLite backend is not there yet"),
    ),
]


async def open_backend(kind: str, tmp_path: Path) -> EventStore:
    """Open a store of ``kind``; SQLite stores all use the file ``tmp_path / "loop.db"``."""
    if kind == "memory":
        return await open_store("memory://")
    return await open_store(tmp_path / "loop.db", auto_upgrade=True)
