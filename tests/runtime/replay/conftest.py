"""Fixtures of the replay tests: a real store (memory, and a SQLite file)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from eventstore import EventStore, open_store


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    url = "memory://" if request.param == "memory" else tmp_path / "replay.db"
    opened = await open_store(url, auto_upgrade=True)
    async with opened:
        yield opened
