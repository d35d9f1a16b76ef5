"""Which reads go to a standby (``backends/postgres/replicas.ReadRoute``): standbys in turn, a
session this store just wrote on the primary, a standby that failed skipped for a while."""

from __future__ import annotations

import asyncio

import pytest

from eventstore.backends.postgres import replicas
from eventstore.backends.postgres.replicas import ReadRoute


def _route(*urls: str, fresh_for: float = 10.0) -> tuple[ReadRoute, list[str]]:
    opened: list[str] = []

    async def connect(url: str) -> str:
        opened.append(url)
        return f"pool:{url}"

    return ReadRoute(urls, connect, fresh_for=fresh_for), opened


def test_read_route_takes_standbys_in_turn_and_opens_each_once() -> None:
    route, opened = _route("a", "b")

    async def main() -> list[object]:
        return [await route.pool() for _ in range(4)]

    assert asyncio.run(main()) == [(0, "pool:a"), (1, "pool:b"), (0, "pool:a"), (1, "pool:b")]
    assert opened == ["a", "b"]


def test_read_route_reads_own_writes_on_the_primary(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(replicas.time, "monotonic", lambda: now[0])
    route, _ = _route("a", fresh_for=10.0)
    assert not route.primary_only("s")
    route.wrote("s")
    assert route.primary_only("s")
    assert not route.primary_only("other")
    assert not route.primary_only(None)  # listings
    now[0] += 10.5
    assert not route.primary_only("s")


def test_read_route_skips_a_failed_standby(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(replicas.time, "monotonic", lambda: now[0])
    route, _ = _route("a", "b")

    async def indexes(n: int) -> list[int | None]:
        picked = [await route.pool() for _ in range(n)]
        return [None if p is None else p[0] for p in picked]

    route.failed(0)
    assert asyncio.run(indexes(3)) == [1, 1, 1]
    route.failed(1)
    assert asyncio.run(indexes(1)) == [None]  # every standby down: the primary
    now[0] += replicas.RETRY_AFTER + 0.1
    assert sorted(asyncio.run(indexes(2))) == [0, 1]
