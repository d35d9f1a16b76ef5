"""The store façade's retention methods: pruning old sessions into archives, and the per-app
policies that say how old is old. Knows no SQL.

What a prune guarantees, session by session (``RetentionMethods.prune``): the archive (the
lossless ``evs export`` format) is written, fsynced, read back and compared with the log
(``eventstore._archive``) before the session is deleted, and the delete is conditional on the
session still being at the version that was archived, judged in the delete's own transaction.
So a prune killed at any moment leaves each session either intact or deleted with its complete
archive on disk, and a session appended to while it was being archived is kept.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from pathlib import Path

from eventstore._archive import write_archive
from eventstore._args import check_bool, check_number, check_str
from eventstore._exceptions import ConcurrencyError, SessionNotFoundError, StoreUsageError
from eventstore._retention import PrunedSession, PruneOutcome, PruneReport, RetentionPolicy
from eventstore.backends.protocol import Backend, SessionRecord

from .addressing import StoreBase

__all__ = ["RetentionMethods"]

_PAGE = 500
"""Sessions selected per read."""

_CONCURRENT = 8
"""Sessions archived and deleted at once: their fsyncs and reads overlap (each session is
still all or nothing on its own)."""


def _seconds(value: object, name: str) -> float:
    """A positive duration given as seconds or a timedelta."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return check_number(value, name)


def _directory(archive: object) -> Path | None:
    if archive is None:
        return None
    if not isinstance(archive, (str, os.PathLike)) or not os.fspath(archive):
        raise StoreUsageError(f"archive must be a directory path or None, not {archive!r}.")
    return Path(os.fspath(archive)).absolute()


class RetentionMethods(StoreBase):
    """Mixed into EventStore: ``prune``, ``prune_by_policy`` and the retention policies."""

    async def prune(
        self,
        *,
        older_than: float | timedelta,
        archive: str | os.PathLike[str] | None,
        app_name: str | None = None,
        dry_run: bool = False,
        now: float | None = None,
    ) -> PruneReport:
        """Delete the sessions (of ``app_name``, or of every app) last updated more than
        ``older_than`` (seconds, or a timedelta) before ``now`` (default: the clock), oldest
        first, each archived first under ``archive`` unless that is None.

        ``archive`` must be given: a directory (created when missing) that receives
        ``<app>/<session>.jsonl`` per session — the ``evs export`` format, which ``evs import``
        turns back into the identical log — or None to delete without archives. For each
        session, all or nothing: the archive is fsynced and verified against the log before
        the delete, and the delete happens only if the session is still at the version that
        was archived (else it is kept: ``kept_changed``). ``dry_run`` lists what would go and
        writes nothing. Returns a report of every selected session and what became of it.

        Sessions are handled a few at a time (``_CONCURRENT``), so their fsyncs overlap. Raises
        ArchiveError (naming the session) when an archive cannot be written or does not read
        back equal to the log: that session and every later one are kept (those being pruned
        alongside it may have been deleted, each with its archive); StoreUsageError for bad
        arguments or a read-only store.
        """
        seconds = _seconds(older_than, "older_than")
        directory = _directory(archive)
        check_str(app_name, "app_name", optional=True)
        dry_run = check_bool(dry_run, "dry_run")
        clock = time.time() if now is None else check_number(now, "now", positive=False)
        backend = self._open_backend() if dry_run else self._writable_backend()
        done: list[PrunedSession] = []
        after: tuple[float, str] | None = None
        while True:
            page = await backend.sessions_updated_before(
                before=clock - seconds, app_name=app_name, after=after, limit=_PAGE)
            for start in range(0, len(page), _CONCURRENT):
                try:
                    async with asyncio.TaskGroup() as group:  # an error cancels the others
                        tasks = [group.create_task(_prune_one(backend, r, directory,
                                                              dry_run=dry_run))
                                 for r in page[start:start + _CONCURRENT]]
                except BaseExceptionGroup as failed:
                    raise failed.exceptions[0] from None  # the error itself, not a group
                done += [task.result() for task in tasks]
            if len(page) < _PAGE:
                return PruneReport(dry_run=dry_run, sessions=tuple(done))
            after = (page[-1].updated_at, page[-1].session_id)

    async def prune_by_policy(
        self,
        *,
        archive: str | os.PathLike[str] | None,
        dry_run: bool = False,
        now: float | None = None,
    ) -> PruneReport:
        """``prune`` every app that has a retention policy by its policy: its ``older_than``,
        and its archive directory — or ``archive`` for a policy without one (None: no archive
        for those). One report for all of them, app by app."""
        directory = _directory(archive)
        sessions: list[PrunedSession] = []
        for policy in await self._open_backend().retention_policies():
            report = await self.prune(
                older_than=policy.older_than, app_name=policy.app_name, dry_run=dry_run,
                archive=policy.archive if policy.archive is not None else directory, now=now)
            sessions += report.sessions
        return PruneReport(dry_run=check_bool(dry_run, "dry_run"), sessions=tuple(sessions))

    async def set_retention(
        self,
        *,
        app_name: str,
        older_than: float | timedelta,
        archive: str | os.PathLike[str] | None = None,
    ) -> RetentionPolicy:
        """Store the app's retention policy (replacing its previous one) and return it:
        ``prune_by_policy`` (``evs prune`` without ``--older-than``) deletes its sessions last
        updated more than ``older_than`` ago, archived under ``archive`` (made absolute now)
        or under the directory the prune names."""
        check_str(app_name, "app_name")
        directory = _directory(archive)
        policy = RetentionPolicy(app_name=app_name,
                                 older_than=_seconds(older_than, "older_than"),
                                 archive=None if directory is None else str(directory),
                                 set_at=time.time())
        await self._writable_backend().set_retention_policy(policy)
        return policy

    async def retention_policies(self) -> list[RetentionPolicy]:
        """Return every stored retention policy, by app name."""
        return await self._open_backend().retention_policies()

    async def clear_retention(self, *, app_name: str | None = None) -> int:
        """Delete the app's retention policy (every policy when ``app_name`` is None) and
        return how many were deleted. Sessions are not touched."""
        check_str(app_name, "app_name", optional=True)
        return await self._writable_backend().clear_retention_policy(app_name)


async def _prune_one(backend: Backend, record: SessionRecord, directory: Path | None, *,
                     dry_run: bool) -> PrunedSession:
    """Archive (unless ``directory`` is None) and conditionally delete one session."""
    path: Path | None = None
    size = 0

    def result(outcome: PruneOutcome) -> PrunedSession:
        return PrunedSession(session_id=record.session_id, app_name=record.app_name,
                             user_id=record.user_id, events=record.version,
                             updated_at=record.updated_at, outcome=outcome,
                             archive=None if path is None else str(path), archive_bytes=size)

    if dry_run:
        return result("would_delete")
    try:
        if directory is not None:
            path, size = await write_archive(backend, record, directory)
        deleted = await backend.delete_session(record.session_id,
                                               expected_version=record.version)
    except SessionNotFoundError:
        return result("gone")
    except ConcurrencyError:
        return result("kept_changed")
    return result("deleted" if deleted else "gone")
