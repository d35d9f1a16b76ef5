"""Opening a store from a URL: picks the backend the URL names."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from ._chain import SIGNING_KEY_ENV, resolve_signing_key
from ._exceptions import StoreUsageError
from ._statefold import DEFAULT_SNAPSHOT_INTERVAL
from .backends.memory import MemoryBackend
from .backends.protocol import Backend
from .store.facade import EventStore

__all__ = ["DEFAULT_URL", "KEYED_WITHOUT_KEY", "open_store", "resolve_url"]

DEFAULT_URL = "sqlite+aiosqlite:///evs.db"
"""The embedded default: a SQLite file ``evs.db`` in the working directory."""


def resolve_url(url: str | os.PathLike[str] | None) -> str:
    """Return the canonical URL for ``url``: a plain file path becomes a SQLite URL,
    ``postgresql://`` becomes ``postgresql+asyncpg://``, None becomes DEFAULT_URL.

    A plain path is taken literally: it is percent-encoded into the URL, so ``new%41.db``,
    ``we?ird.db``, ``a#b.db`` or ``my db.db`` name exactly that file. A URL stays a URL (its
    percent-escapes are decoded, as in any URL)."""
    if url is None:
        return DEFAULT_URL
    if isinstance(url, os.PathLike):
        return _path_url(str(Path(url)))
    if not isinstance(url, str) or not url:
        raise StoreUsageError(f"A store URL must be a non-empty string or path, not {url!r}.")
    if url in ("memory", "memory://", ":memory:"):
        return "memory://"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    if url.startswith("sqlite://") and not url.startswith("sqlite+aiosqlite://"):
        return "sqlite+aiosqlite://" + url.split("://", 1)[1]
    if "://" not in url:
        return _path_url(url)
    return url


def _path_url(path: str) -> str:
    return "sqlite+aiosqlite:///" + urllib.parse.quote(path, safe="/")


async def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    auto_upgrade: bool = False,
    read_only: bool = False,
    synchronous: str = "NORMAL",
    snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL,
    signing_key: bytes | str | None = None,
    read_urls: Sequence[str] = (),
) -> EventStore:
    """Open the store the URL names and return it (use it with ``async with``).

    - a file path or ``sqlite+aiosqlite:///path.db``: the embedded SQLite backend;
    - ``postgresql+asyncpg://user@host/db`` (or ``postgresql://…``): the PostgreSQL backend;
    - ``memory://``: the in-memory backend (nothing persists).

    A SQL database whose schema is behind head raises SchemaOutdatedError with the command that
    upgrades it, unless ``auto_upgrade`` is set. ``read_only`` opens SQLite read-only (writes
    fail). ``synchronous`` is SQLite's ``NORMAL`` (durable against a process crash; the newest
    commits may be lost on power failure) or ``FULL`` (durable against power failure, slower).

    ``signing_key`` (bytes, or a str taken as UTF-8; default: the ``EVS_SIGNING_KEY``
    environment variable) opens the store in keyed mode: every event it appends is signed, and
    ``EventStore.untrusted`` names the events whose signature is missing or wrong (the runner
    acts on none of them). Every store chains its events' hashes, keyed or not (README, "Tamper
    evidence"). An empty key raises StoreUsageError. A store opened without a key (and not
    ``read_only``) on a database a keyed store wrote to reads but refuses every write with
    StoreUsageError naming ``EVS_SIGNING_KEY`` (``KEYED_WITHOUT_KEY``), since the events it
    would append are unsigned ones the keyed runner will not act on.

    ``read_urls`` (PostgreSQL only) name hot standbys of the database: the reads that may be
    a moment stale (listings, a session's history, memory search, live tails) go to them, a
    session this store wrote in the last 10 seconds is read on the primary (read-your-writes),
    and a standby that fails is skipped for the primary (``backends/postgres/replicas``;
    docs/operations.md).
    """
    try:
        key = resolve_signing_key(signing_key)
    except (ValueError, TypeError) as exc:
        raise StoreUsageError(f"signing_key must be non-empty bytes or str: {exc}") from exc
    resolved = resolve_url(url)
    if isinstance(read_urls, str):
        read_urls = [read_urls]
    replicas = [resolve_url(u) for u in read_urls]
    if replicas and not resolved.startswith("postgresql+asyncpg://"):
        raise StoreUsageError(f"read_urls name PostgreSQL standbys; the store {url!r} is not "
                              "PostgreSQL.")
    backend: Backend
    if resolved == "memory://":
        return EventStore(MemoryBackend(signing_key=key), snapshot_interval=snapshot_interval)
    if resolved.startswith("sqlite+aiosqlite://"):
        from .backends.sqlite.base import SQLiteBackend

        backend = await SQLiteBackend.open(
            resolved, auto_upgrade=auto_upgrade, read_only=read_only, synchronous=synchronous,
            signing_key=key,
        )
    elif resolved.startswith("postgresql+asyncpg://"):
        from .backends.postgres.base import PostgresBackend

        backend = await PostgresBackend.open(resolved, auto_upgrade=auto_upgrade,
                                             signing_key=key, read_urls=replicas)
    else:
        raise StoreUsageError(
            f"Unsupported store URL {url!r}: use a file path, sqlite+aiosqlite:///path.db, "
            "postgresql+asyncpg://user@host/db or memory://."
        )
    refusal = None
    if key is None and not read_only:
        try:
            keyed = await backend.has_signed_heads()
        except BaseException:
            await backend.aclose()
            raise
        if keyed:
            refusal = KEYED_WITHOUT_KEY
    return EventStore(backend, snapshot_interval=snapshot_interval, write_refusal=refusal)


KEYED_WITHOUT_KEY = (
    f"This database is keyed (a store with a signing key wrote to it), and this store was "
    f"opened without the key, so it only reads: an unsigned event would be one the runner "
    f"refuses to act on. Set {SIGNING_KEY_ENV} (or pass signing_key=) to write."
)
"""Why a store opened without the key on a keyed database refuses to write."""

