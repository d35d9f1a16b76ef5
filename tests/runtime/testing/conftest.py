"""Fixtures of the runtime.testing tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from eventstore import EventStore, open_store


@pytest.fixture
async def store() -> AsyncIterator[EventStore]:
    async with await open_store("memory://") as opened:
        yield opened
