"""A closed OpenAI Agents session raises what the SDK's own ``SQLiteSession`` raises (a
``RuntimeError``), on memory, SQLite and PostgreSQL, so code written for the SDK's sessions
catches it; it is our ``StoreClosedError`` as well."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import asyncio  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from _evs_support import BackendTarget  # noqa: E402
from agents.memory import Session, SQLiteSession  # noqa: E402

from eventstore import StoreClosedError, open_store  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession  # noqa: E402


def _calls(session: Session) -> list[Callable[[], Awaitable[Any]]]:
    item = {"role": "user", "content": "x"}
    return [lambda: session.get_items(), lambda: session.add_items([item]),
            lambda: session.pop_item(), lambda: session.clear_session()]


async def _closed_errors(session: Session) -> list[type[BaseException]]:
    """The type each call raises on the closed session, after checking it is a RuntimeError."""
    found = []
    for call in _calls(session):
        with pytest.raises(RuntimeError) as caught:
            await call()
        found.append(type(caught.value))
    return found


def test_a_closed_session_raises_a_runtime_error_as_sqlite_session_does(
    backend_target: BackendTarget,
) -> None:
    theirs = SQLiteSession("s")
    ours = EventStoreSession("s", backend_target.url)
    for session in (theirs, ours):
        asyncio.run(session.add_items([{"role": "user", "content": "a"}]))
        session.close()
    assert set(asyncio.run(_closed_errors(theirs))) == {RuntimeError}
    assert set(asyncio.run(_closed_errors(ours))) == {StoreClosedError}


async def test_a_session_on_a_closed_store_raises_a_runtime_error(
    backend_target: BackendTarget,
) -> None:
    store = await open_store(backend_target.url, auto_upgrade=True)
    session = EventStoreSession("s", store)
    await session.add_items([{"role": "user", "content": "a"}])
    await store.aclose()
    assert set(await _closed_errors(session)) == {StoreClosedError}
