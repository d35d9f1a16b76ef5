"""Fixtures of the loop tests: a real store per backend (see ``_loop_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _loop_support import BACKENDS, open_backend

from eventstore import EventStore


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventStore]:
    opened = await open_backend(request.param, tmp_path)
    async with opened:
        yield opened
