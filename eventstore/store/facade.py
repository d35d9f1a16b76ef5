"""The store façade: the public async API over one backend, assembled from the store's rooms.

``EventStore`` is one class to its users; its methods live by concern in the rooms it mixes
in: ``addressing`` (lifecycle, event loop, session keys), ``sessions``, ``appends`` (encoding,
append, compaction), ``reads`` (events and mappings), ``state`` (state and caches),
``artifacts``, ``fork`` and ``retention``. It checks arguments, encodes events for the backend
(decoding and state folding with snapshots live in ``_statefold``) and knows no SQL. Every
method is a coroutine; the store is used with ``async with`` or closed with ``aclose()``.
"""

from __future__ import annotations

from eventstore._session import Session, SessionInfo, SessionPage

from .appends import AppendMethods
from .artifacts import Artifact, ArtifactMethods, ArtifactVersion
from .fork import ForkMethods
from .reads import EventReads, MappingReads
from .retention import RetentionMethods
from .sessions import ImportBatch, SessionMethods
from .state import StateMethods

__all__ = [
    "Artifact", "ArtifactVersion", "EventStore", "ImportBatch", "Session", "SessionInfo",
    "SessionPage",
]


class EventStore(
    SessionMethods,
    StateMethods,
    AppendMethods,
    EventReads,
    MappingReads,
    ArtifactMethods,
    ForkMethods,
    RetentionMethods,
):
    """An append-only, per-session event log with derived state and versioned artifacts.

    Guarantees, on every backend: appends are atomic and checked against ``expected_version``;
    each session's events get ``seq`` 1, 2, 3 … with no gap; an event row is never changed; state
    is the fold of the stored state deltas (see ``eventstore._state``); a row that cannot be
    decoded raises CorruptEventError, never a silent skip.
    """
