"""A pytest plugin that runs LangGraph's own graph tests with ``EventStoreSaver`` as their
checkpointer.

LangGraph's ``libs/langgraph/tests/conftest.py`` draws every test's checkpointer from two
fixtures, ``sync_checkpointer`` and ``async_checkpointer``, parametrized over its own savers.
Before pytest reads that conftest's fixtures, this plugin puts ours in their place (same names),
parametrized over our saver on each backend: ``evs_memory`` (``memory://``), ``evs_sqlite`` (a
SQLite file per test), ``evs_sqlite_aes`` (the same, values encrypted with
``EncryptedSerializer.from_pycryptodome_aes``; sync only, as LangGraph's ``sqlite_aes``) and
``evs_postgres`` (one PostgreSQL database for the run, a fresh ``app_name`` per test, so no test
sees another's threads). LangGraph's code is not copied: the tests are read from the checkout
given to ``run_langgraph_upstream_tests.py``.

``EVS_LANGGRAPH_BACKENDS`` (default ``memory,sqlite,sqlite_aes,postgres``) picks the backends;
``EVS_TEST_POSTGRES_URL`` names the PostgreSQL server (default: the tests' one). With
``EVS_LANGGRAPH_IN_MEMORY=1`` the tests that build LangGraph's ``InMemorySaver`` themselves
rather than take a fixture (its ``DeltaChannel`` tests, among others) get our saver on a SQLite
file of its own instead: a subclass standing in under that name in each test module, so a test
that patches the class's methods patches ours.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# Imported here, before any test runs: some of LangGraph's tests patch ``uuid.uuid4`` and the
# store takes its generator at import, so importing it under that patch would keep the patch.
from eventstore.integrations.langgraph import EventStoreSaver

_POSTGRES = os.environ.get("EVS_TEST_POSTGRES_URL",
                           "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
_KINDS = os.environ.get("EVS_LANGGRAPH_BACKENDS", "memory,sqlite,sqlite_aes,postgres").split(",")
_CONFTEST = "conftest.py"
_DATABASE = f"evs_lg_{os.getpid()}_{secrets.token_hex(4)}"


async def _admin(sql: str) -> None:
    import asyncpg

    server = _POSTGRES.replace("postgresql+asyncpg://", "postgresql://", 1).rsplit("/", 1)[0]
    conn = await asyncpg.connect(server + "/postgres", timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


_made_database = False


def _postgres_url() -> str:
    """The run's PostgreSQL database, made on first use (dropped by ``pytest_unconfigure``)."""
    global _made_database
    if not _made_database:
        asyncio.run(_admin(f'CREATE DATABASE "{_DATABASE}"'))
        _made_database = True
    return _POSTGRES.rsplit("/", 1)[0] + "/" + _DATABASE


def _saver(kind: str, tmp_path: Path) -> Any:
    if kind == "memory":
        return EventStoreSaver("memory://")
    if kind == "sqlite":
        return EventStoreSaver(tmp_path / "evs.db")
    if kind == "sqlite_aes":
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        return EventStoreSaver(tmp_path / "evs.db", serde=EncryptedSerializer.from_pycryptodome_aes(
            key=b"1234567890123456"))
    if kind == "postgres":
        return EventStoreSaver(_postgres_url(), app_name=f"t{secrets.token_hex(16)}")
    raise pytest.UsageError(f"unknown EVS_LANGGRAPH_BACKENDS entry {kind!r}")


@pytest.fixture(params=[f"evs_{kind}" for kind in _KINDS])
def sync_checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Our saver on each backend in turn, for LangGraph's sync graph tests."""
    saver = _saver(request.param.removeprefix("evs_"), tmp_path)
    saver.setup()
    try:
        yield saver
    finally:
        saver.close()


@pytest.fixture(params=[f"evs_{kind}" for kind in _KINDS if kind != "sqlite_aes"])
async def async_checkpointer(request: pytest.FixtureRequest,
                             tmp_path: Path) -> AsyncIterator[Any]:
    """Our saver on each backend in turn, for LangGraph's async graph tests."""
    saver = _saver(request.param.removeprefix("evs_"), tmp_path)
    await saver.asetup()
    try:
        yield saver
    finally:
        await saver.aclose()


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: Any, plugin_name: str) -> None:
    """Put our fixtures in LangGraph's conftest before pytest reads its fixtures (it defers
    reading a conftest until its directory is collected)."""
    if (plugin_name or "").endswith(_CONFTEST) and hasattr(plugin, "sync_checkpointer"):
        plugin.sync_checkpointer = sync_checkpointer
        plugin.async_checkpointer = async_checkpointer


def pytest_unconfigure(config: pytest.Config) -> None:
    """Drop the run's PostgreSQL database."""
    if _made_database:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{_DATABASE}" WITH (FORCE)'))


class _InMemoryStandIn(EventStoreSaver):
    """Our saver on a fresh SQLite file, built as a test builds ``InMemorySaver()``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import tempfile

        super().__init__(Path(tempfile.mkdtemp(prefix="evs-lg-")) / "evs.db",
                         serde=kwargs.get("serde"))
        self.setup()  # the schema made now, as the fixtures do, not inside a timed test


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With ``EVS_LANGGRAPH_IN_MEMORY=1``: ``InMemorySaver`` in each test module is ours."""
    if os.environ.get("EVS_LANGGRAPH_IN_MEMORY") != "1":
        return
    from langgraph.checkpoint.memory import InMemorySaver

    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "InMemorySaver", None) is InMemorySaver:
            module.InMemorySaver = _InMemoryStandIn
