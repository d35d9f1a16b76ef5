"""Every pooled connection to PostgreSQL carries TCP keepalives and a user timeout, so an append
in flight when the primary's machine vanishes fails (retryably) within ``SILENCE_TIMEOUT``
instead of waiting for the kernel's retransmissions (about 15 minutes on Linux)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from eventstore import open_store
from eventstore.backends.postgres.base import SILENCE_TIMEOUT, PostgresBackend

pytestmark = pytest.mark.postgres


def test_postgres_connections_bound_silence(empty_postgres_url: str) -> None:
    async def main() -> dict[str, int]:
        async with await open_store(empty_postgres_url, auto_upgrade=True) as store:
            backend = store.backend
            assert isinstance(backend, PostgresBackend)
            async with backend._pool.acquire() as conn:
                sock = conn._con._transport.get_extra_info("socket")
                return {
                    "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    "user_timeout": sock.getsockopt(socket.IPPROTO_TCP,
                                                    socket.TCP_USER_TIMEOUT),
                }

    options = asyncio.run(main())
    assert options["keepalive"] == 1
    assert options["idle"] == 5
    assert options["user_timeout"] == SILENCE_TIMEOUT * 1000
