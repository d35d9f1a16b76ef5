"""The PostgreSQL backend's warm connection (``backends/postgres/warm.py``): the next job takes
the connection the last one released cleanly; a failed job's, one unused for ``LINGER``, one
wanted by a job waiting for the pool, and one that closed meanwhile go back to the pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from eventstore.backends.postgres import warm
from eventstore.backends.postgres.warm import WarmPool

pytestmark = pytest.mark.postgres


@contextlib.asynccontextmanager
async def _warmed(url: str, size: int = 2) -> AsyncIterator[tuple[asyncpg.Pool, WarmPool]]:
    """A pool of ``size`` connections and the WarmPool over it, both closed after."""
    pool = await asyncpg.create_pool(url.replace("postgresql+asyncpg://", "postgresql://"),
                                     min_size=1, max_size=size)
    warmed = WarmPool(pool)
    try:
        yield pool, warmed
    finally:
        await warmed.close()
        await asyncio.wait_for(pool.close(), 10)


async def test_postgres_warm_next_job_takes_the_released_connection(postgres_url: str) -> None:
    async with _warmed(postgres_url) as (_pool, warmed):
        async with warmed.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
        async with warmed.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == pid
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with warmed.acquire() as conn:
                await conn.fetchval("SELECT 1 / 0")
        assert warmed._idle is None  # a failed job's connection went back to the pool


async def test_postgres_warm_closed_connection_is_not_reused(postgres_url: str) -> None:
    async with _warmed(postgres_url) as (pool, warmed):
        async with warmed.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
        async with pool.acquire() as other:
            await other.fetchval("SELECT pg_terminate_backend($1)", pid)
        await asyncio.sleep(0.2)  # the warm connection learns it was closed
        async with warmed.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") != pid


async def test_postgres_warm_connection_goes_back_unused_or_wanted(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm, "LINGER", 0.05)
    async with _warmed(postgres_url, size=1) as (pool, warmed):
        async with warmed.acquire() as conn:
            await conn.fetchval("SELECT 1")
        assert warmed._idle is not None
        await asyncio.sleep(0.3)
        assert warmed._idle is None  # unused for LINGER: back in the pool
        async with pool.acquire() as conn:  # which has it to give
            await conn.fetchval("SELECT 1")

        # One connection in all: a job waiting for the pool gets the one released meanwhile.
        holding = asyncio.Event()
        release = asyncio.Event()

        async def holder() -> None:
            async with warmed.acquire():
                holding.set()
                await release.wait()

        async def waiter() -> int:
            async with warmed.acquire() as conn:
                return int(await conn.fetchval("SELECT 2"))

        first = asyncio.create_task(holder())
        await holding.wait()
        second = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)
        release.set()
        await first
        assert await asyncio.wait_for(second, 5) == 2
