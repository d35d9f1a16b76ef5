"""Fixtures shared by every test package.

PostgreSQL: ``EVS_TEST_POSTGRES_URL`` (default ``postgresql+asyncpg://postgres@127.0.0.1:5432/test``)
names the server. When it is unreachable the tests that need it skip, saying how to enable them —
except when ``CI`` is set, where they fail: CI must not go green without PostgreSQL.

``SLOW_MODULES`` marks whole modules ``slow`` in one place (besides the modules that mark
themselves), so that ``pytest -m "not slow"`` stays a quick subset; the run's header says how
long each takes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Cache bytecode even where the environment sets PYTHONDONTWRITEBYTECODE: otherwise every run
# (and every xdist worker) rewrites the asserts of each test module again, about half of
# collection's CPU, and each `evs` subprocess compiles the project from source. Subprocesses
# still inherit the variable, but read the caches this process writes.
sys.dont_write_bytecode = False

SLOW_MODULES = frozenset({
    # Each runs `evs` in subprocesses or drives the in-process CLI on a real database per test:
    # together more than a minute of CPU.
    "runtime/cli/test_adk_runner.py",
    "runtime/cli/test_answer.py",
    "runtime/cli/test_closed_stdout.py",
    "runtime/cli/test_db_messages.py",
    "runtime/cli/test_errors.py",
    "runtime/cli/test_exchange.py",
    "runtime/cli/test_heads.py",
    "runtime/cli/test_import_atomic.py",
    "runtime/cli/test_inspect.py",
    "runtime/cli/test_interrupt.py",
    "runtime/cli/test_maintain.py",
    "runtime/cli/test_postgres.py",
    "runtime/cli/test_show_pager.py",
    # In-process CLI runs over paged exports and imports: 5 to 18 s each in the quick subset.
    "runtime/cli/test_import_evidence.py",
    "runtime/cli/test_import_paged.py",
    "runtime/cli/test_import_shared_state.py",
    "runtime/cli/test_prune_cmd.py",
    "runtime/cli/test_session_address.py",
    "runtime/cli/test_show_paged.py",
    # Hypothesis with hundreds of examples of large ADK events; LangGraph's conformance suite.
    "eventstore/integrations/adk/test_adk_events.py",
    # The ADK crash scenario killed and resumed in subprocesses, answered by `evs`.
    "eventstore/integrations/adk/test_adk_crash.py",
    "eventstore/integrations/langgraph/test_contract_langgraph.py",
    # Hypothesis over whole runs (hundreds of examples, a runner and a store each): 1.5 to
    # 2.5 s of CPU per module, the quick subset's slowest tests.
    "runtime/replay/test_replay_compaction.py",
    "runtime/replay/test_replay_pending_runner.py",
    "runtime/replay/test_replay_properties.py",
    # Migration modules (up and down on real files), as the other migration modules; GC pauses
    # measured over long reads.
    "eventstore/test_gcpause.py",
    "eventstore/test_imported_chain_migration.py",
    "eventstore/test_none_value_migration.py",
    "eventstore/test_scope_streams_migration.py",
    # A subprocess per example or per test (the docs' code blocks, the OTLP export), a web
    # server per test and a real browser: 6 to 85 s of CPU each.
    "otel/test_export.py",
    "test_readme.py",
    "web/test_browser.py",
    "web/test_http.py",
})
"""Modules (relative to ``tests/``) that ``pytest_collection_modifyitems`` marks ``slow``."""

QUICK_POSTGRES_MODULES = frozenset({"eventstore/test_contract_create.py"})
"""The only modules whose ``postgres`` tests stay in the quick subset: PostgreSQL tests spend
most of their time waiting on the server (about 40% of the quick subset's time before), so the
quick subset keeps one contract module as PostgreSQL's smoke test."""

SUITE_DURATIONS = (
    "the whole suite needs about 11 minutes of CPU: about 7.5 minutes with -n 4 on two cores "
    '(longer on a loaded machine); pytest -m "not slow" -n 2 is the quick subset (about 63 s of '
    "CPU: an estimated 35 to 45 s on two idle cores): see docs/testing.md"
)
"""What the run's header tells a user (docs/testing.md has the measurements)."""


def pytest_report_header() -> str:
    """Say how long the suite takes and how to run the quick subset."""
    return SUITE_DURATIONS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a module in ``SLOW_MODULES`` ``slow``; a listed module that does not
    exist (renamed, moved) is an error, so the quick subset cannot grow back silently."""
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / name).is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES names missing files: {missing}")
    slow = pytest.mark.slow
    for item in items:
        if not item.path.is_relative_to(TESTS):
            continue
        name = item.path.relative_to(TESTS).as_posix()
        postgres = item.get_closest_marker("postgres") is not None
        if not postgres and _postgres_param(item):
            item.add_marker(pytest.mark.postgres)  # so that -m postgres runs it too
            postgres = True
        if name in SLOW_MODULES or (name not in QUICK_POSTGRES_MODULES and postgres):
            item.add_marker(slow)


_POSTGRES_FIXTURES = frozenset({"postgres_server_url", "empty_postgres_url", "postgres_url"})


def _postgres_param(item: pytest.Item) -> bool:
    """Whether the test needs PostgreSQL without the marker saying so: it asks for one of the
    PostgreSQL fixtures, or a parameter of it (a fixture's ``params`` included) is
    ``"postgres"`` (modules that pick their backend by a fixture of their own)."""
    if _POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        isinstance(value, str) and value == "postgres" for value in callspec.params.values()
    )



@pytest.fixture(autouse=True, scope="session")
def _fresh_sqlite_from_a_template() -> Iterator[None]:
    """New SQLite files that ``open_store(..., auto_upgrade=True)`` creates are copies of one
    migrated once per process (``tests/_fresh_sqlite.py``): half the quick subset's CPU was
    the same migrations run again for each new file."""
    import _fresh_sqlite

    undo = _fresh_sqlite.install()
    yield
    undo()


@pytest.fixture(autouse=True)
def _real_migrations(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked ``real_migrations`` see new SQLite files migrated by alembic itself."""
    if request.node.get_closest_marker("real_migrations") is None:
        yield
        return
    import _fresh_sqlite

    _fresh_sqlite.enabled(False)
    try:
        yield
    finally:
        _fresh_sqlite.enabled(True)


POSTGRES_URL_ENV = "EVS_TEST_POSTGRES_URL"
DEFAULT_TEST_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def test_postgres_url() -> str:
    """The PostgreSQL server URL the tests use."""
    return os.environ.get(POSTGRES_URL_ENV, DEFAULT_TEST_POSTGRES_URL)


test_postgres_url.__test__ = False  # type: ignore[attr-defined]


def _dsn(url: str, database: str) -> str:
    base = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    return base.rsplit("/", 1)[0] + "/" + database


def _admin(url: str, *statements: str) -> None:
    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(_dsn(url, "postgres"), timeout=5)
        try:
            for sql in statements:
                await conn.execute(sql)
        finally:
            await conn.close()

    # A private loop in a worker thread: sync fixtures must not touch pytest-asyncio's loop.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The URL of a reachable PostgreSQL server; skips (fails under ``CI``) when there is none."""
    url = test_postgres_url()
    try:
        _admin(url, "SELECT 1")
    except Exception as exc:  # OSError, ImportError, asyncpg's own (auth, unknown database …)
        message = (
            f"PostgreSQL not reachable at {url} ({type(exc).__name__}: {exc}); start it or set "
            f"{POSTGRES_URL_ENV}"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


@pytest.fixture
def empty_postgres_url(postgres_server_url: str) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database private to this test (dropped after it).

    Unique names make parallel test runs against one server safe.
    """
    name = f"evs_e_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    _admin(postgres_server_url, f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        _admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
