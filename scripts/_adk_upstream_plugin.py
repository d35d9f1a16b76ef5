"""A pytest plugin that runs google-adk's own session contract tests on our session service.

ADK's ``tests/unittests/sessions/test_session_service.py`` takes its ``session_service``
fixture from the backend registry ``tests/unittests/sessions/_conformance.py``. This plugin
puts a registry of ours under that module's name before the tests are collected, so every
contract test runs on ``EventStoreSessionService`` over ``memory://``, a SQLite file and a
fresh PostgreSQL database (ids ``evs_memory``, ``evs_sqlite``, ``evs_postgres``). ADK's code
is not copied: the tests are read from the checkout given to ``run_adk_upstream_tests.py``.

``EVS_ADK_BACKENDS`` (default ``memory,sqlite,postgres``) picks the backends;
``EVS_TEST_POSTGRES_URL`` names the PostgreSQL server (default: the tests' one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import types
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

_MODULE = "tests.unittests.sessions._conformance"
_POSTGRES = os.environ.get("EVS_TEST_POSTGRES_URL",
                           "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


@dataclasses.dataclass(frozen=True)
class Backend:
    """One store our service runs on, shaped like an entry of ADK's registry."""

    name: str
    divergences: Mapping[str, str] = dataclasses.field(default_factory=dict)


async def _admin(sql: str) -> None:
    import asyncpg

    server = _POSTGRES.replace("postgresql+asyncpg://", "postgresql://", 1).rsplit("/", 1)[0]
    conn = await asyncpg.connect(server + "/postgres", timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _service(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    from eventstore.integrations.adk import EventStoreSessionService

    database = None
    if kind == "memory":
        url = "memory://"
    elif kind == "sqlite":
        url = str(tmp_path / "evs.db")
    else:
        database = f"evs_adk_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        await _admin(f'CREATE DATABASE "{database}"')
        url = _POSTGRES.rsplit("/", 1)[0] + "/" + database
    service = EventStoreSessionService(url)
    try:
        yield service
    finally:
        await service.close()
        if database is not None:
            await _admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


BACKENDS = [Backend(f"evs_{kind}") for kind in
            os.environ.get("EVS_ADK_BACKENDS", "memory,sqlite,postgres").split(",")]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
async def session_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Our session service on each backend in turn."""
    async with _service(request.param.name.removeprefix("evs_"), tmp_path) as service:
        yield service


def pytest_configure(config: pytest.Config) -> None:
    """Register this registry under the name ADK's tests import it by."""
    module = types.ModuleType(_MODULE, __doc__)
    module.BACKENDS = BACKENDS  # type: ignore[attr-defined]
    module.session_service = session_service  # type: ignore[attr-defined]
    sys.modules[_MODULE] = module
