"""Fixtures of the loop tests: a real store (memory, and a SQLite file when the backend exists)."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from eventstore import EventStore, open_store

HAS_SQLITE = importlib.util.find_spec("eventstore._sqlite") is not None

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param(
        "sqlite",
        id="sqlite",
        marks=pytest.mark.skipif(not HAS_SQLITE, reason="the SQLite backend is not there yet"),
    ),
]


async def open_backend(kind: str, tmp_path: Path) -> EventStore:
    if kind == "memory":
        return await open_store("memory://")
    return await open_store(tmp_path / "loop.db", auto_upgrade=True)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    opened = await open_backend(request.param, tmp_path)
    async with opened:
        yield opened
