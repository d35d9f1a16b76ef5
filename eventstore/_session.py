"""The session records the store façade returns: a session as read, as listed, and a page of
a listing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._events import Event

__all__ = ["Session", "SessionInfo", "SessionPage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A session's identity and summary, as listed."""

    id: str
    """Session id (unique in the store)."""
    app_name: str
    """Application the session belongs to."""
    user_id: str
    """User the session belongs to."""
    created_at: float
    """Creation time (seconds since the epoch)."""
    updated_at: float
    """Timestamp of the newest event (``created_at`` when there is none)."""
    version: int
    """Number of events: the ``seq`` of the newest one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A session as read: identity, state at the read version, and the events asked for."""

    id: str
    """Session id."""
    app_name: str
    """Application the session belongs to."""
    user_id: str
    """User the session belongs to."""
    created_at: float
    """Creation time."""
    updated_at: float
    """Timestamp of the newest event."""
    version: int
    """``seq`` of the newest event when the session was read."""
    state: dict[str, Any]
    """Merged state (session, ``user:`` and ``app:`` keys) at ``version``."""
    events: list[Event]
    """The events asked for (all by default), oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """One page of a session listing."""

    sessions: list[SessionInfo]
    """Sessions in the listing's order (``list_sessions``: by id)."""
    next_cursor: str | None
    """Pass as ``after`` to get the next page; None on the last page."""
