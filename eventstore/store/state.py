"""The store's state and caches: state at head or at a seq (folded with snapshots by
``_statefold``), the full-replay reference, and the session caches (``load_cache`` /
``save_cache``) and their drop. Knows no SQL.
"""

from __future__ import annotations

import hmac
from typing import Any

from eventstore._args import check_int, check_lookup, check_seq_bound
from eventstore._chain import CACHE_MAC_SIZE, sign_session_cache
from eventstore._exceptions import SessionNotFoundError, StoreUsageError
from eventstore._state import apply_actions

from .reads import EventReads

__all__ = ["StateMethods"]


def _check_cache_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 255 or "\0" in name:
        raise StoreUsageError(
            f"A cache name must be a string of 1 to 255 characters without NUL, not {name!r}."
        )
    return name


class StateMethods(EventReads):
    """Mixed into EventStore: ``state``, ``session_state_fold``, the session caches and
    ``rebuild_snapshots``."""

    async def state(
        self,
        session_id: str,
        *,
        at: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Return the merged state (session, ``user:``, ``app:`` keys) at head or at ``seq=at``.

        ``user:``/``app:`` keys are folded from every session of the user/app up to the global
        position of the event at ``at``, so state at a seq is what the session saw then.
        """
        check_int(at, "at", optional=True, minimum=-(1 << 63), maximum=1 << 63)
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        if at is None:
            at = record.version
        elif not 0 <= at <= record.version:
            raise StoreUsageError(
                f"Session {session_id!r} has events 1..{record.version}; there is no seq {at}."
            )
        return await self._folder.state(record, at=at)

    async def session_state_fold(
        self,
        session_id: str,
        *,
        at: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Return the session-scoped state at ``at`` by a full replay, ignoring snapshots.

        The reference the snapshots are checked against (``evs verify`` and the tests).
        """
        rows = await self.read(session_id, upto=check_seq_bound(at, "at", minimum=0),
                               app_name=app_name, user_id=user_id)
        state: dict[str, Any] = {}
        for event in rows:
            apply_actions(state, event.actions, scope="session")
        return state

    async def rebuild_snapshots(self) -> int:
        """Drop every snapshot — of session state and of ``user:``/``app:`` state — and every
        session cache (``save_cache``): they are caches; the next reads rebuild them. Returns
        how many were dropped."""
        return await self._open_backend().drop_snapshots()

    async def load_cache(
        self, session_id: str, name: str, *, app_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[int, bytes] | None:
        """Return ``(seq, data)`` of the session's cache ``name`` (see ``save_cache``), or None
        when there is none (or no such session).

        A cache is never a source of truth: the caller must check it still describes the log
        (e.g. the id of the event at ``seq``) and ignore it otherwise. A keyed store serves
        only a cache it saved itself (its MAC, ``eventstore._chain.sign_session_cache``,
        checks out): one written behind its back reads as None."""
        backend = self._open_backend()
        name = _check_cache_name(name)

        async def load(key: str, owner: tuple[str, str]) -> tuple[int, bytes] | None:
            found = await backend.load_cache(key, name, owner=owner)
            signing_key = backend.signing_key
            if found is None or signing_key is None:
                return found
            seq, stored = found
            data, mac = stored[:-CACHE_MAC_SIZE], stored[-CACHE_MAC_SIZE:]
            if len(stored) < CACHE_MAC_SIZE or not hmac.compare_digest(
                    mac, sign_session_cache(signing_key, key, name, seq, data)):
                return None  # not the key's: the caller rebuilds it from the log
            return seq, data

        try:
            return await self._keyed(check_lookup(session_id), app_name, user_id, load)
        except SessionNotFoundError:
            return None

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        app_name: str | None = None, user_id: str | None = None,
    ) -> None:
        """Keep ``data``, state its caller derived from the session's events ``1..seq``, as the
        session's cache ``name`` (replacing the previous one), for ``load_cache``.

        A cache, like the state snapshots: deleted with the session, dropped by
        ``rebuild_snapshots`` (``evs db rebuild-snapshots``), not copied by ``fork``, not kept
        by a read-only store or for a session that does not exist. The log stays the only
        source of truth: the reader checks the cache against it."""
        backend = self._open_backend()
        check_lookup(session_id)
        name = _check_cache_name(name)
        seq = check_int(seq, "seq", minimum=0, maximum=(1 << 31) - 1)
        if not isinstance(data, bytes):
            raise StoreUsageError(f"data must be bytes, not {type(data).__name__}.")

        async def save(key: str, owner: tuple[str, str]) -> None:
            signing_key = backend.signing_key
            stored = data if signing_key is None else (
                data + sign_session_cache(signing_key, key, name, seq, data))
            await backend.save_cache(key, name, seq, stored, owner=owner)

        try:
            await self._keyed(session_id, app_name, user_id, save)
        except SessionNotFoundError:
            return
