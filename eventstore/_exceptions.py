"""Errors raised by the event store.

The tree::

    EventStoreError                      root of everything this package raises
    ├── StoreUsageError                  developer misuse (closed store, bad URL, bad arguments)
    │   ├── StoreClosedError             the store (or a framework session, saver or service
    │   │                                over it) was used after it was closed; also a
    │   │                                RuntimeError, as a closed SQLiteSession's error is
    │   └── AmbiguousSessionError        a session id held by several (app, user) was given
    │                                    without the app and user that pick one
    ├── InvalidEventError                an event or state delta cannot be stored as given
    ├── SessionNotFoundError             no such session (or it belongs to another app/user)
    ├── SessionExistsError               create_session (or fork) with an id that is taken
    ├── ForkPointError                   fork at a seq outside the log or inside a step
    ├── ConcurrencyError                 append (or conditional delete) with a stale
    │                                    ``expected_version``
    ├── DuplicateEventError              an event id is stored with another payload, or a retry
    │                                    overlaps stored events only partly
    ├── ArtifactNotFoundError            no such artifact or artifact version
    ├── ArtifactConflictError            a session created with artifacts would number one
    │                                    differently than given (nothing written)
    ├── TamperedArtifactError            a keyed store's artifact version does not match its
    │                                    signed record (edited), or carries no seal (saved
    │                                    before the key or revision 0020, or stripped)
    ├── CorruptEventError                a stored event row cannot be decoded
    ├── CorruptSnapshotError             a stored state snapshot (a cache) cannot be decoded
    ├── ArchiveError                     a prune's archive of a session could not be written or
    │                                    does not match the log (the session is kept)
    ├── TamperedLogError                 a session's log disagrees with its head record; no
    │                                    append is stacked on it
    ├── SchemaError                      the database schema is not the one this code needs
    │   └── SchemaOutdatedError          the schema is behind head; carries the upgrade command
    └── StorageError                     the database failed (driver error, translated once)

Every error carries the ids it is about as attributes and says them in its message. Nothing that
raises one of these has changed stored data.
"""

from __future__ import annotations

import shlex

__all__ = [
    "AmbiguousSessionError",
    "ArchiveError",
    "ArtifactConflictError",
    "ArtifactNotFoundError",
    "ConcurrencyError",
    "CorruptEventError",
    "CorruptSnapshotError",
    "DuplicateEventError",
    "EventStoreError",
    "ForkPointError",
    "InvalidEventError",
    "SchemaError",
    "SchemaOutdatedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StorageError",
    "StoreClosedError",
    "StoreUsageError",
    "TamperedArtifactError",
    "TamperedLogError",
]


class EventStoreError(Exception):
    """Root of every error the event store raises."""


class StoreUsageError(EventStoreError):
    """The store was used in a way it does not support (a developer error)."""


class StoreClosedError(StoreUsageError, RuntimeError):
    """The store was used after it was closed, directly or through an integration over it (an
    OpenAI Agents session, a LangGraph saver, an ADK service) that was closed.

    Also a ``RuntimeError``: what the OpenAI Agents SDK's ``SQLiteSession`` (and httpx's closed
    client) raise, so code written for them catches it unchanged."""

    def __init__(self) -> None:
        super().__init__("The event store is closed; open a new one with open_store().")


class InvalidEventError(EventStoreError):
    """An event cannot be stored as given; nothing was written.

    ``event_id`` names the offending event when known, ``key`` the offending state key.
    """

    def __init__(self, message: str, *, event_id: str | None = None, key: str | None = None):
        super().__init__(message)
        self.event_id = event_id
        self.key = key


class AmbiguousSessionError(StoreUsageError):
    """A session id was given without ``app_name``/``user_id`` and several (app, user) have a
    session with that id (session ids are unique per app and user, not in the store); nothing
    was read or written. ``choices`` lists the ``(app_name, user_id)`` pairs, sorted: pass
    the ones meant."""

    def __init__(self, session_id: str, choices: list[tuple[str, str]]):
        shown = ", ".join(f"app {app!r} user {user!r}" for app, user in choices)
        super().__init__(
            f"Session id {session_id!r} is held by {len(choices)} sessions ({shown}); pass "
            "app_name= and user_id= to pick one."
        )
        self.session_id = session_id
        self.choices = choices


class SessionNotFoundError(EventStoreError):
    """The session does not exist (or does not belong to the given app and user)."""

    def __init__(self, session_id: str, *, detail: str = ""):
        message = f"Session {session_id!r} does not exist."
        if detail:
            message = f"{message[:-1]} {detail}"
        super().__init__(message)
        self.session_id = session_id


class SessionExistsError(EventStoreError):
    """A session with this id already exists; nothing was written."""

    def __init__(self, session_id: str):
        super().__init__(f"Session {session_id!r} already exists; choose another id.")
        self.session_id = session_id


class ForkPointError(EventStoreError):
    """A session cannot be forked at the given seq; nothing was written.

    ``reason`` is ``"out_of_range"`` (the seq is not one of the session's events ``1..head``)
    or ``"inside_step"`` (the seq falls between a tool call and its response: see
    ``EventStore.fork``). ``before`` and ``after`` are the nearest seqs a fork may start at
    (None when there is none on that side).
    """

    def __init__(self, message: str, *, session_id: str, seq: int, reason: str,
                 before: int | None = None, after: int | None = None):
        super().__init__(message)
        self.session_id = session_id
        self.seq = seq
        self.reason = reason
        self.before = before
        self.after = after


class ConcurrencyError(EventStoreError):
    """The session moved on since the caller read it; nothing was written.

    Read the new events (``read(after=expected_version)``), decide again, and retry with
    ``expected_version=actual_version``.
    """

    def __init__(self, session_id: str, *, expected_version: int, actual_version: int,
                 refused: str = "nothing was appended"):
        super().__init__(
            f"Session {session_id!r} is at version {actual_version}, not at the expected "
            f"version {expected_version}; {refused}."
        )
        self.session_id = session_id
        self.expected_version = expected_version
        self.actual_version = actual_version


class DuplicateEventError(EventStoreError):
    """An event id is already stored with a different payload, or a retried batch overlaps the
    stored events only partly; nothing was written."""

    def __init__(self, message: str, *, session_id: str, event_id: str):
        super().__init__(message)
        self.session_id = session_id
        self.event_id = event_id


class ArtifactNotFoundError(EventStoreError):
    """The artifact (or the requested version of it) does not exist."""

    def __init__(self, session_id: str | None, filename: str, version: int | None = None):
        which = f"version {version} of artifact" if version is not None else "artifact"
        where = "among the user's artifacts" if session_id is None else (
            f"in session {session_id!r}"
        )
        super().__init__(f"There is no {which} {filename!r} {where}.")
        self.session_id = session_id
        self.filename = filename
        self.version = version


class ArtifactConflictError(EventStoreError):
    """Creating a session with artifacts would store one under another version number than
    the one given (the file already has versions: a ``user:`` artifact another session saved);
    nothing was written."""

    def __init__(self, session_id: str, filename: str, *, expected_version: int,
                 actual_version: int):
        super().__init__(
            f"Artifact {filename!r} of session {session_id!r} would be stored as version "
            f"{actual_version}, not as version {expected_version}; nothing was written."
        )
        self.session_id = session_id
        self.filename = filename
        self.expected_version = expected_version
        self.actual_version = actual_version


class TamperedArtifactError(EventStoreError):
    """A keyed store refused to serve an artifact version that its key does not vouch for
    (``problem``, the code ``evs verify`` reports too, and ``reason`` say which):

    - ``artifact_edited``, ``artifact_bad_signature``: its stored bytes, MIME type, save time
      or metadata no longer match the record the store signed when it saved it, so it was
      changed behind the store's back;
    - ``artifact_unsigned``, ``artifact_unverified``: its record carries no signature (saved
      before the store was keyed) or no digest (saved before revision 0020), or someone
      removed them; nothing tells such a version from an edited one, so it is not served
      until an operator who checked it with ``evs verify`` adopts it with
      ``evs db sign-artifacts``.
    """

    def __init__(self, session_id: str | None, filename: str, version: int, *, reason: str,
                 problem: str = "artifact_edited"):
        where = "among the user's artifacts" if session_id is None else (
            f"in session {session_id!r}")
        if problem in _UNVOUCHED:
            message = (
                f"Version {version} of artifact {filename!r} {where} is not served by this "
                f"keyed store: {reason}, so the key does not vouch for its content. Once "
                "`evs verify` shows the database is as you expect, `evs db sign-artifacts` "
                "vouches for such versions as they are now.")
        else:
            message = (
                f"Version {version} of artifact {filename!r} {where} was changed behind the "
                f"store's back ({reason}); it is not served. `evs verify` names the damage.")
        super().__init__(message)
        self.session_id = session_id
        self.filename = filename
        self.version = version
        self.reason = reason
        self.problem = problem


_UNVOUCHED = frozenset({"artifact_unsigned", "artifact_unverified"})
"""``TamperedArtifactError.problem`` codes of versions whose seal is missing, not wrong."""


class CorruptEventError(EventStoreError):
    """A stored event cannot be decoded; it is never skipped silently."""

    def __init__(self, session_id: str, seq: int, reason: str):
        super().__init__(f"Event {seq} of session {session_id!r} cannot be decoded: {reason}")
        self.session_id = session_id
        self.seq = seq
        self.reason = reason


class ArchiveError(EventStoreError):
    """A prune could not write a session's archive, or it does not read back equal to the log;
    the session was not deleted. ``session_id`` and ``path`` say which."""

    def __init__(self, message: str, *, session_id: str, path: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path


class CorruptSnapshotError(EventStoreError):
    """A stored state snapshot cannot be decoded; state is never read from it silently.

    ``seq`` is the snapshot's seq for a session snapshot, None for a ``user:``/``app:`` one.
    Snapshots are a cache: dropping them (``EventStore.rebuild_snapshots()``, ``evs db
    rebuild-snapshots``) loses nothing.
    """

    def __init__(self, session_id: str | None, seq: int | None, reason: str):
        where = f"at seq {seq} " if seq is not None else ""
        whose = f"of session {session_id!r} " if session_id is not None else ""
        super().__init__(
            f"The state snapshot {where}{whose}cannot be decoded: {reason} "
            "Snapshots are a cache: evs db rebuild-snapshots drops them (the log is untouched)."
        )
        self.session_id = session_id
        self.seq = seq
        self.reason = reason


class TamperedLogError(EventStoreError):
    """A session's log ends elsewhere than its head record says (events were removed or added
    behind the store's back). The store appends nothing to it, which would hide the evidence;
    ``evs verify`` says what changed."""

    def __init__(self, session_id: str, *, head_seq: int, version: int):
        super().__init__(
            f"Session {session_id!r} records its newest event at seq {head_seq} but its log "
            f"ends at seq {version}: it was changed behind the store's back, so nothing is "
            f"appended to it. `evs verify {shlex.quote(session_id)}` lists what changed."
        )
        self.session_id = session_id
        self.head_seq = head_seq
        self.version = version


class SchemaError(EventStoreError):
    """The database schema is not the one this version of the code needs."""


class SchemaOutdatedError(SchemaError):
    """The database schema is behind head; ``command`` upgrades it."""

    def __init__(self, url: str, *, current: str | None, head: str, command: str):
        at = f"revision {current}" if current else "no schema at all"
        super().__init__(
            f"The database {url} has {at}, but this code needs revision {head}. "
            f"Upgrade it with: {command}"
        )
        self.url = url
        self.current = current
        self.head = head
        self.command = command


class StorageError(EventStoreError):
    """The database failed; the driver's exception is the ``__cause__``.

    ``retryable`` is True when the failure was transient (the server was unreachable, the
    connection broke, the server restarted): the same call may succeed later, and an append
    retried with the same event ids is stored exactly once whether or not the failed attempt
    committed. False for a failure a retry would repeat."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
