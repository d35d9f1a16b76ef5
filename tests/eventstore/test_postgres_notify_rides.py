"""A due NOTIFY rides in the next grouped append's statement (``backends/postgres/notify.py``):
a waiter in another process is woken by it, and no notification has a transaction of its own
while appends keep coming."""

from __future__ import annotations

import asyncio
import time

import pytest

from eventstore import Content, Event, Part, open_store
from eventstore.backends.postgres import notify
from eventstore.backends.postgres.base import POLL_INTERVAL, PostgresBackend

pytestmark = pytest.mark.postgres


def _text(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


async def test_postgres_notify_rides_in_the_next_append(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_store(postgres_url)
    reader = await open_store(postgres_url)
    try:
        backend = writer.backend
        assert isinstance(backend, PostgresBackend)
        alone: list[list[str]] = []
        real_take = notify.Notices._take

        def counting_take(self: notify.Notices) -> list[str]:
            taken = real_take(self)
            if asyncio.current_task() is self._notifier:
                alone.append(taken)
            return taken

        monkeypatch.setattr(notify.Notices, "_take", counting_take)
        # Long enough that, however loaded the machine, the second append comes first.
        monkeypatch.setattr(notify, "NOTIFY_DELAY", 0.5)
        first = await writer.create_session(app_name="a", user_id="u", session_id="first")
        second = await writer.create_session(app_name="a", user_id="u", session_id="second")
        await reader.backend.wait_for_events(first.id, after=0, max_wait=0.01)  # listening

        woken = asyncio.create_task(reader.backend.wait_for_events(first.id, after=0,
                                                                   max_wait=10))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        await writer.append(first.id, _text("one"), expected_version=0)
        # The next append carries the first one's notification (the last one left long ago).
        await writer.append(second.id, _text("two"), expected_version=0)
        await asyncio.wait_for(woken, 5)
        assert time.perf_counter() - started < min(POLL_INTERVAL, 0.5)
        assert alone == [], "a notification went alone while appends kept coming"
    finally:
        await reader.aclose()
        await writer.aclose()
