"""Retention: what a prune deletes, what it reports, and the per-app policy the store keeps.

Records only (no I/O): ``EventStore.prune`` (``store.retention``) does the work, the backends
keep the policies. A prune never deletes a session before its archive — the lossless export
format of ``evs export`` (``eventstore._exchange``) — is written, synced to disk and checked
against the log; see ``EventStore.prune`` for the whole guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PruneOutcome", "PruneReport", "PrunedSession", "RetentionPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """How long an app's sessions are kept after their last update (``evs retention set``)."""

    app_name: str
    """The app the policy is for."""
    older_than: float
    """Seconds: a prune by the policy deletes the app's sessions last updated longer ago."""
    archive: str | None
    """The directory the sessions are archived to, or None: the prune names one (``evs prune
    --archive``) or says explicitly that it keeps no archive."""
    set_at: float
    """When the policy was set (seconds since the epoch)."""


PruneOutcome = Literal["deleted", "would_delete", "kept_changed", "gone"]
"""What a prune did with one session: ``deleted`` (archived first, when an archive was asked
for), ``would_delete`` (a dry run), ``kept_changed`` (it changed after it was archived: kept,
the archive stays as a copy of what it was), ``gone`` (deleted by someone else meanwhile)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunedSession:
    """One session a prune selected, and what became of it."""

    session_id: str
    """The session."""
    app_name: str
    """Its app."""
    user_id: str
    """Its user."""
    events: int
    """How many events it had (its version) when it was selected."""
    updated_at: float
    """Its last update (the newest event's timestamp, or its creation time)."""
    outcome: PruneOutcome
    """What the prune did with it."""
    archive: str | None = None
    """The archive file written for it, or None (a dry run, or no archive asked for)."""
    archive_bytes: int = 0
    """The archive file's size in bytes (0 when none was written)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    """What a prune selected and did, session by session, oldest update first."""

    dry_run: bool
    """Whether it only listed what would go (nothing written, nothing deleted)."""
    sessions: tuple[PrunedSession, ...]
    """Every session it selected, in the order it handled them."""

    @property
    def deleted(self) -> tuple[PrunedSession, ...]:
        """The sessions it deleted."""
        return tuple(s for s in self.sessions if s.outcome == "deleted")

    @property
    def kept(self) -> tuple[PrunedSession, ...]:
        """The sessions it selected but kept because they changed after being archived."""
        return tuple(s for s in self.sessions if s.outcome == "kept_changed")

    @property
    def events_deleted(self) -> int:
        """How many events went with the deleted sessions."""
        return sum(s.events for s in self.deleted)

    @property
    def archive_bytes(self) -> int:
        """How many bytes of archive files it wrote."""
        return sum(s.archive_bytes for s in self.sessions)
