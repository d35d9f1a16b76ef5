"""Alembic environment for the event store (async engines; one connection per run).

The database URL is, in order: ``config.attributes["url"]`` (set by ``eventstore._migrate``),
``-x url=…`` on the alembic command line, the ``EVS_DATABASE_URL`` environment variable, the
ini file's ``sqlalchemy.url``, and finally the embedded default ``sqlite+aiosqlite:///evs.db``.
A plain file path is accepted and means a SQLite file.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import event, pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from eventstore._open import DEFAULT_URL, resolve_url
from eventstore._schema import described_by_models, metadata
from eventstore._urls import sqlalchemy_url

config = context.config

# Only the alembic CLI configures logging; a programmatic upgrade leaves the app's logging alone.
if config.config_file_name is not None and not config.attributes.get("url"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = (
        config.attributes.get("url")
        or context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get("EVS_DATABASE_URL")
        or config.get_main_option("sqlalchemy.url")
        or DEFAULT_URL
    )
    return resolve_url(url)


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    context.configure(
        connection=connection,
        url=url,
        target_metadata=metadata,
        compare_type=True,
        # What the migrations create without a model (memory index, SQLite's event layout):
        # autogenerate would otherwise propose dropping it, data and all.
        include_name=described_by_models,
        # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
        render_as_batch=(url or str(connection.engine.url if connection else "")).startswith(
            "sqlite"
        ),
        # One transaction for the whole upgrade on every backend (SQLite's DDL made
        # transactional by _transactional_sqlite_ddl): it commits whole or not at all.
        transactional_ddl=True,
    )


_PG_MIGRATION_LOCK = 0x65767330
"""Advisory lock key ("evs0") serializing upgrades of one PostgreSQL database across processes."""


def _run_sync(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Before alembic reads the current revision: a second upgrader waits here, then
            # finds the schema at head instead of creating tables that already exist.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                               {"key": _PG_MIGRATION_LOCK})
        context.run_migrations()


def _transactional_sqlite_ddl(engine: AsyncEngine) -> None:
    """Make SQLite's DDL part of the migration's one transaction.

    Python's sqlite3 driver opens a transaction only before DML, so each CREATE TABLE would
    commit on its own: a process killed mid-upgrade (a first ``open_store(auto_upgrade=True)``
    included) would leave tables without their ``alembic_version`` row, a database no later
    upgrade can open. With the driver's own BEGIN off and ours emitted, the upgrade commits
    whole or not at all."""

    @event.listens_for(engine.sync_engine, "connect")
    def _no_driver_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")


async def _run_online(url: str) -> None:
    # Several hosts (h1:5432,h2:5433) in SQLAlchemy's own spelling: its URL parser knows one.
    engine = create_async_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    if engine.dialect.name == "sqlite":
        _transactional_sqlite_ddl(engine)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    _configure(url=_url())
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online(_url()))
