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

ADK's tests of resumable invocations (runners, agents, flows) build their services inside each
test, through ``tests/unittests/testing_utils.py`` or directly. With ``EVS_ADK_RESUME`` set to a
backend (``run_adk_upstream_tests.py --resume`` sets it, once per backend), every
``InMemorySessionService()`` those modules make is ``EventStoreSessionService`` on a fresh store
of that backend instead, seen through ``_Synced``: the same service, its calls run on one event
loop of its own, so the synchronous ``create_session_sync`` / ``get_session_sync`` that
``testing_utils.InMemoryRunner`` calls from inside a running test loop work too.

ADK's tests written for its own services in that module (``BACKEND_SPECIFIC``) build those
services inside the test. With ``EVS_ADK_BACKEND_SPECIFIC`` set
(``run_adk_upstream_tests.py --backend-specific``), each runs once per backend with the
module's service classes swapped for a subclass of ours bound to a fresh store, and only those
cases are collected.

``EVS_ADK_BACKENDS`` (default ``memory,sqlite,postgres``) picks the backends;
``EVS_TEST_POSTGRES_URL`` names the PostgreSQL server (default: the tests' one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import sys
import tempfile
import threading
import types
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
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
    """Give each ADK artifact test that draws its service from the module's factory, and each
    test of ``BACKEND_SPECIFIC``, a backend."""
    if (os.environ.get("EVS_ADK_ARTIFACTS") and metafunc.module.__name__ == _ARTIFACTS
            and "artifact_service_factory" in metafunc.fixturenames):
        metafunc.parametrize("evs_artifact_backend", BACKENDS, indirect=True,
                             ids=lambda backend: backend.name)
    if _swapped(metafunc):
        metafunc.parametrize("evs_adk_swap", BACKENDS, indirect=True,
                             ids=lambda backend: backend.name)


def pytest_configure(config: pytest.Config) -> None:
    """Register this registry under the name ADK's tests import it by."""
    module = types.ModuleType(_MODULE, __doc__)
    module.BACKENDS = BACKENDS  # type: ignore[attr-defined]
    module.session_service = session_service  # type: ignore[attr-defined]
    sys.modules[_MODULE] = module


# --- resumable invocations: ADK's tests that build their own services ------------------------

_RESUME_ENV = "EVS_ADK_RESUME"


class _Synced:
    """``EventStoreSessionService`` on ``url``, every call run on an event loop in a thread of
    its own (async callers await it, the ``*_sync`` methods wait for it)."""

    def __init__(self, url: str) -> None:
        from eventstore.integrations.adk import EventStoreSessionService

        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self.inner = EventStoreSessionService(url)

    def _submit(self, name: str, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        method = getattr(self.inner, name)
        return asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop)

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_sync"):
            return lambda *a, **k: self._submit(name.removesuffix("_sync"), *a, **k).result()
        attr = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.wrap_future(self._submit(name, *args, **kwargs))

        return call


def _register_as_session_service() -> None:
    from google.adk.sessions import BaseSessionService

    BaseSessionService.register(_Synced)


_made: list[tuple[_Synced, str | None]] = []


def _admin_now(sql: str) -> None:
    """``_admin`` from synchronous code, also inside a running test loop (in a thread)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _admin(sql)).result()


def _fresh_url(kind: str) -> tuple[str, str | None]:
    if kind == "memory":
        return "memory://", None
    if kind == "sqlite":
        return str(Path(tempfile.mkdtemp(prefix="evs-adk-resume-")) / "evs.db"), None
    database = f"evs_adk_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    _admin_now(f'CREATE DATABASE "{database}"')
    return _POSTGRES.rsplit("/", 1)[0] + "/" + database, database


def _ours(*args: object, **kwargs: object) -> _Synced:
    url, database = _fresh_url(os.environ[_RESUME_ENV])
    service = _Synced(url)
    _made.append((service, database))
    return service


@pytest.fixture(autouse=True)
def evs_resume_backend(request: pytest.FixtureRequest,
                       monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """With ``EVS_ADK_RESUME``, the in-memory session service of the module and of ADK's
    ``*testing_utils`` helpers is ours on that backend; the stores made are closed (databases
    dropped) after the test."""
    if not os.environ.get(_RESUME_ENV):
        yield
        return
    _register_as_session_service()
    helpers = [m for name, m in list(sys.modules.items())
               if name.startswith("tests.unittests.") and name.endswith("testing_utils")]
    for module in (request.module, *helpers):
        if module is not None and hasattr(module, "InMemorySessionService"):
            monkeypatch.setattr(module, "InMemorySessionService", _ours)
    try:
        yield
    finally:
        log = os.environ.get("EVS_ADK_RESUME_LOG")
        if log and _made:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(request.node.nodeid + "\n")
        while _made:
            service, database = _made.pop()
            with contextlib.suppress(Exception):
                service.close_sync()
            service._loop.call_soon_threadsafe(service._loop.stop)
            if database is not None:
                _admin_now(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# --- ADK's tests of its own database services, on ours ----------------------------------------

_SESSIONS = "tests.unittests.sessions.test_session_service"
_SPECIFIC_ENV = "EVS_ADK_BACKEND_SPECIFIC"

BACKEND_SPECIFIC = (
    "test_append_event_to_stale_session",
    "test_sqlite_append_event_uses_typed_stale_session_error",
    "test_append_event_concurrent_stale_sessions_reject_stale_writer",
    "test_append_event_allows_timestamp_drift_for_current_session",
    "test_append_event_allows_markerless_current_session",
    "test_append_event_to_deleted_session_raises_session_not_found",
    "test_append_event_with_non_serializable_state_delta",
    "test_get_session_orders_tied_timestamps_by_id",
    "test_create_session_with_padded_duplicate_id_raises_error",
    "test_create_session_with_blank_id_generates_one",
    "test_append_event_is_idempotent_for_same_event_id",
    "test_append_different_events_not_deduplicated",
)
"""ADK's tests written for its ``DatabaseSessionService`` / ``SqliteSessionService`` /
``InMemorySessionService`` that state what a session service owes its callers (the
stale-writer error and its words, concurrent stale writers, timestamp drift, marker-less
session objects, a deleted session, a state value JSON cannot encode, ties ordered by id,
padded and blank ids, an identical re-append, a different event under a held id). They build
ADK's services inside the test, so the registry cannot reach them; with
``EVS_ADK_BACKEND_SPECIFIC`` set each runs once per backend with the module's service classes
swapped for ours (a test parametrized over ADK's service types runs once, under ``DATABASE``:
every type is our service then)."""


@pytest.fixture(autouse=True)
async def evs_adk_swap(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[type | None]:
    """For a test of ``BACKEND_SPECIFIC``: the module's session service classes build our
    service on the parameter's backend (constructor arguments are ignored; ``async with``
    closes it); yields that class. Elsewhere (no parameter) this does nothing."""
    backend: Backend | None = getattr(request, "param", None)
    if backend is None:
        yield None
        return
    from eventstore.integrations.adk import EventStoreSessionService

    made: list[EventStoreSessionService] = []
    async with _store_url(backend.name.removeprefix("evs_"), tmp_path) as url:

        class Ours(EventStoreSessionService):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(url)
                made.append(self)

            async def __aenter__(self) -> Ours:
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.close()

        for name in ("DatabaseSessionService", "SqliteSessionService", "InMemorySessionService"):
            monkeypatch.setattr(request.module, name, Ours)
        try:
            yield Ours
        finally:
            for service in made:
                await service.close()


def _swapped(metafunc: pytest.Metafunc) -> bool:
    return bool(os.environ.get(_SPECIFIC_ENV) and metafunc.module.__name__ == _SESSIONS
                and metafunc.function.__name__ in BACKEND_SPECIFIC)


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Iterator[None]:
    """A swapped test given an ADK service as its ``session_service`` parameter gets ours."""
    ours = pyfuncitem.funcargs.get("evs_adk_swap")
    if isinstance(ours, type) and "session_service" in pyfuncitem.funcargs:
        pyfuncitem.funcargs["session_service"] = ours()
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``EVS_ADK_BACKEND_SPECIFIC``, keep only the swapped cases, one per ADK service
    type (``DATABASE``)."""
    if not os.environ.get(_SPECIFIC_ENV):
        return
    keep: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kind = params.get("service_type")
        if "evs_adk_swap" in params and (kind is None or kind.name == "DATABASE"):
            keep.append(item)
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
