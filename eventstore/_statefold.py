"""State folding for the store façade: decoding stored rows, and state at a seq via snapshots.

State is the fold of the stored state deltas (the rule is in ``eventstore._state``). Reading it
from scratch replays the whole log, so the folder keeps snapshots — a cache the backend may drop —
of each session's own state every ``snapshot_interval`` events, and of each ``user:``/``app:``
scope every ``snapshot_interval`` shared-state events. A fold through snapshots always equals a
full replay (``session_state_fold`` is the reference). Knows no SQL: it uses the Backend protocol.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import orjson

from ._backend import Backend, SessionRecord, SharedSnapshot, StoredEvent
from ._codec import SCHEMA_VERSION, decode_event, decode_trusted
from ._events import Event
from ._exceptions import CorruptEventError
from ._state import apply_delta, session_part, shared_part
from ._stored import STORED_SCHEMA_VERSION, decode_compact

__all__ = ["DEFAULT_SNAPSHOT_INTERVAL", "StateFolder", "decode_all", "decode_stored"]

DEFAULT_SNAPSHOT_INTERVAL = 200
"""A snapshot of session state is kept every this many events, and one of each ``user:`` and
``app:`` scope every this many shared-state events (a state read replays at most about this many
deltas per scope)."""


def decode_stored(stored: StoredEvent) -> Event:
    """Decode one stored envelope; raises CorruptEventError naming session and seq."""
    try:
        version = stored.schema_version
        if version == STORED_SCHEMA_VERSION:
            return decode_compact(
                stored.payload, event_id=stored.event_id, author=stored.author,
                invocation_id=stored.invocation_id, timestamp=stored.timestamp, seq=stored.seq,
            )
        if version == SCHEMA_VERSION:  # the event JSON, as rows were stored before version 2
            return decode_trusted(stored.payload, seq=stored.seq)
        return decode_event(stored.payload, schema_version=stored.schema_version, seq=stored.seq)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptEventError(stored.session_id, stored.seq, repr(exc)) from exc


def decode_all(rows: Sequence[StoredEvent]) -> list[Event]:
    """Decode stored envelopes in order; raises CorruptEventError at the first bad one."""
    # Decoding allocates many small objects; pausing the cyclic GC meanwhile halves the cost.
    enabled = gc.isenabled()
    if enabled and len(rows) > 256:
        gc.disable()
    try:
        return [decode_stored(row) for row in rows]
    finally:
        if enabled:
            gc.enable()


class StateFolder:
    """Folds a session's merged state (session, ``user:`` and ``app:`` keys) at a seq, reading
    and saving snapshots through ``backend``."""

    def __init__(self, backend: Backend, *, snapshot_interval: int) -> None:
        self._backend = backend
        self._snapshot_interval = snapshot_interval

    async def state(self, record: SessionRecord, *, at: int) -> dict[str, Any]:
        """Return the merged state of the session ``record`` names at ``seq=at``
        (``0 <= at <= record.version``, checked by the caller).

        ``user:``/``app:`` keys are folded up to the global position of the event at ``at``, so
        the state at a seq is what the session saw then.
        """
        backend = self._backend
        sid = record.session_id
        snapshot = await backend.load_snapshot(sid, upto=at)
        base_seq, state = (0, {}) if snapshot is None else (snapshot[0], orjson.loads(snapshot[1]))
        tail = await backend.read(sid, after=base_seq, upto=at, backwards=False, limit=None)
        for event in decode_all(tail):
            apply_delta(state, session_part(event.actions.state_delta))
        if at == record.version and at - base_seq >= self._snapshot_interval:
            await backend.save_snapshot(sid, at, orjson.dumps(state))
        position: int | None = None
        if at < record.version:
            position = tail[-1].position if tail else await self._position_of(sid, at)
        if at == 0 and record.version > 0:
            return state
        for user_id in (None, record.user_id):
            state.update(await self._shared_state(record.app_name, user_id, upto=position))
        return state

    async def _shared_state(
        self, app_name: str, user_id: str | None, *, upto: int | None
    ) -> dict[str, Any]:
        """The ``app:`` state of the app (``user_id`` None) or the ``user:`` state of the user,
        folded up to global position ``upto``: the newest snapshot at or below it plus the
        shared events after the snapshot."""
        backend = self._backend
        snapshot = await backend.load_shared_snapshot(
            app_name=app_name, user_id=user_id, upto_position=upto
        )
        base_position, base_count, state = (
            (0, 0, {}) if snapshot is None
            else (snapshot.position, snapshot.count, orjson.loads(snapshot.state))
        )
        rows = await backend.read_shared(
            app_name=app_name, user_id=user_id, after_position=base_position, upto_position=upto
        )
        user = user_id is not None
        for event in decode_all(rows):
            apply_delta(state, shared_part(event.actions.state_delta, user=user))
        if len(rows) >= self._snapshot_interval:
            await backend.save_shared_snapshot(
                app_name=app_name,
                user_id=user_id,
                snapshot=SharedSnapshot(
                    position=rows[-1].position,
                    count=base_count + len(rows),
                    state=orjson.dumps(state),
                ),
            )
        return state

    async def _position_of(self, session_id: str, seq: int) -> int:
        rows = await self._backend.read(
            session_id, after=None, upto=seq, backwards=True, limit=1
        )
        return rows[0].position if rows else 0
