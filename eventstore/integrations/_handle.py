"""The store an integration works on: one given, or one opened from a URL on first use."""

from __future__ import annotations

import asyncio
import os

from eventstore import EventStore, StoreUsageError, open_store

__all__ = ["StoreHandle"]


class StoreHandle:
    """An EventStore given, or opened from a URL on first use (and then closed by ``close``)."""

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore) -> None:
        if isinstance(url_or_store, EventStore):
            self._store: EventStore | None = url_or_store
            self._url: str | os.PathLike[str] | None = None
        elif isinstance(url_or_store, (str, os.PathLike)):
            self._store = None
            self._url = url_or_store
        else:
            raise StoreUsageError(
                f"url_or_store must be a store URL, a path or an EventStore, not "
                f"{url_or_store!r}."
            )
        self._lock: asyncio.Lock | None = None

    async def get(self) -> EventStore:
        """The store, opened (``auto_upgrade=True``) on first use when given a URL."""
        if self._store is not None:
            return self._store
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._store is None:
                self._store = await open_store(self._url, auto_upgrade=True)
        return self._store

    async def close(self) -> None:
        """Close the store if this handle opened it (a given store stays open)."""
        if self._url is not None and self._store is not None:
            store, self._store = self._store, None
            await store.aclose()
