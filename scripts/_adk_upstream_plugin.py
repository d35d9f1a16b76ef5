"""A pytest plugin that runs google-adk's own session contract tests on our session service.

ADK's ``tests/unittests/sessions/test_session_service.py`` takes its ``session_service``
fixture from the backend registry ``tests/unittests/sessions/_conformance.py``. This plugin
puts a registry of ours under that module's name before the tests are collected, so every
contract test runs on ``EventStoreSessionService`` over ``memory://``, a SQLite file and a
fresh PostgreSQL database (ids ``evs_memory``, ``evs_sqlite``, ``evs_postgres``). ADK's code
is not copied: the tests are read from the checkout given to ``run_adk_upstream_tests.py``.

ADK's artifact tests (``tests/unittests/artifacts/test_artifact_service.py``) have no registry:
each test draws its service from a factory in the module. For those of its tests that take that
factory, the plugin adds a backend parameter (the same ids) whose fixture swaps the module's
``InMemoryArtifactService`` for ``EventStoreArtifactService`` on that backend, so the in-memory
cases run on ours. It does so only with ``EVS_ADK_ARTIFACTS`` set, which
``run_adk_upstream_tests.py --artifacts`` sets (and selects those cases).

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
_ARTIFACTS = "tests.unittests.artifacts.test_artifact_service"
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
async def _store_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh store of ``kind`` for one test; a PostgreSQL database is dropped afterwards."""
    if kind == "memory":
        yield "memory://"
        return
    if kind == "sqlite":
        yield str(tmp_path / "evs.db")
        return
    database = f"evs_adk_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{database}"')
    try:
        yield _POSTGRES.rsplit("/", 1)[0] + "/" + database
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def _service(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    from eventstore.integrations.adk import EventStoreSessionService

    async with _store_url(kind, tmp_path) as url:
        service = EventStoreSessionService(url)
        try:
            yield service
        finally:
            await service.close()


BACKENDS = [Backend(f"evs_{kind}") for kind in
            os.environ.get("EVS_ADK_BACKENDS", "memory,sqlite,postgres").split(",")]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
async def session_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Our session service on each backend in turn."""
    async with _service(request.param.name.removeprefix("evs_"), tmp_path) as service:
        yield service


@pytest.fixture(autouse=True)
async def evs_artifact_backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """In ADK's artifact tests, ``InMemoryArtifactService()`` builds ours on the parameter's
    backend; everywhere else (no parameter) this does nothing."""
    backend: Backend | None = getattr(request, "param", None)
    if backend is None:
        yield
        return
    from eventstore.integrations.adk import EventStoreArtifactService

    made: list[EventStoreArtifactService] = []
    async with _store_url(backend.name.removeprefix("evs_"), tmp_path) as url:

        def ours(*args: object, **kwargs: object) -> EventStoreArtifactService:
            made.append(EventStoreArtifactService(url))
            return made[-1]

        monkeypatch.setattr(request.module, "InMemoryArtifactService", ours)
        try:
            yield
        finally:
            for service in made:
                await service.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give each ADK artifact test that draws its service from the module's factory a backend."""
    if (os.environ.get("EVS_ADK_ARTIFACTS") and metafunc.module.__name__ == _ARTIFACTS
            and "artifact_service_factory" in metafunc.fixturenames):
        metafunc.parametrize("evs_artifact_backend", BACKENDS, indirect=True,
                             ids=lambda backend: backend.name)


def pytest_configure(config: pytest.Config) -> None:
    """Register this registry under the name ADK's tests import it by."""
    module = types.ModuleType(_MODULE, __doc__)
    module.BACKENDS = BACKENDS  # type: ignore[attr-defined]
    module.session_service = session_service  # type: ignore[attr-defined]
    sys.modules[_MODULE] = module
