"""The rules every backend judges by, so that all of them judge alike: retries of a batch,
repeated ids, fresh session keys, and the seals (digest, signature) of artifact versions and
fork links with the checks a keyed store makes before serving an artifact.
"""

from __future__ import annotations

from collections.abc import Sequence
from hmac import compare_digest
from uuid import uuid4

from eventstore._chain import artifact_digest, fork_link_digest, sign_artifact, sign_fork_link
from eventstore._exceptions import (
    ArtifactConflictError,
    DuplicateEventError,
    TamperedArtifactError,
)
from eventstore._fork import ForkLink

from .records import ArtifactRecord, NewArtifact, NewEvent, StoredEvent

__all__ = [
    "artifact_problem",
    "check_artifact_version",
    "check_batch_ids",
    "check_retry",
    "check_served_artifact",
    "fresh_key",
    "same_event",
    "seal_artifact",
    "seal_fork_link",
]


def check_retry(
    session_id: str, events: Sequence[NewEvent], stored: dict[str, StoredEvent]
) -> list[StoredEvent] | None:
    """Classify a batch against the stored events with the same ids.

    Returns the stored envelopes when the whole batch is an identical retry, None when no id of
    the batch is stored; raises DuplicateEventError for a payload mismatch or a partial overlap.
    Shared by every backend so that all of them judge retries by one rule.
    """
    found: list[StoredEvent] = []
    missing: list[str] = []
    for event in events:
        prior = stored.get(event.event_id)
        if prior is None:
            missing.append(event.event_id)
            continue
        if not same_event(prior, event):
            raise DuplicateEventError(
                f"Event {event.event_id!r} is already stored in session {session_id!r} (seq "
                f"{prior.seq}) with a different payload; event ids cannot be reused.",
                session_id=session_id,
                event_id=event.event_id,
            )
        found.append(prior)
    if not found:
        return None
    if missing:
        raise DuplicateEventError(
            f"The batch overlaps session {session_id!r} only partly: event {found[0].event_id!r} "
            f"is stored but {missing[0]!r} is not; retry the exact batch or only new events.",
            session_id=session_id,
            event_id=missing[0],
        )
    return found


def fresh_key() -> str:
    """A new session key no session holds, for a session whose given id is another's key: a
    random value no app would give (every backend draws keys the same way)."""
    return f"~{uuid4().hex}"


def seal_artifact(signing_key: bytes | None, *, filename: str, version: int, mime_type: str,
                  created_at: float, metadata: bytes | None,
                  data: bytes) -> tuple[bytes, bytes | None]:
    """Return ``(digest, signature)`` of an artifact version's row as a backend stores them
    (``eventstore._chain.artifact_digest``; the signature None when unkeyed)."""
    digest = artifact_digest(filename, version=version, mime_type=mime_type,
                             created_at=created_at, metadata=metadata, data=data)
    return digest, None if signing_key is None else sign_artifact(signing_key, digest)


def artifact_problem(record: ArtifactRecord, signing_key: bytes | None) -> str | None:
    """Why the stored ``record`` is not the version its row's record vouches for, as a stable
    code (``artifact_edited``: its content no longer hashes to the stored digest;
    ``artifact_bad_signature``: keyed, the digest's signature is not the key's;
    ``artifact_unsigned``: keyed, it carries no signature; ``artifact_unverified``: it has no
    digest, saved before revision 0020), or None when it checks out."""
    if record.digest is None:
        return "artifact_unverified"
    try:
        digest = artifact_digest(record.filename, version=record.version,
                                 mime_type=record.mime_type, created_at=record.created_at,
                                 metadata=record.metadata, data=record.data)
    except (ValueError, TypeError):
        return "artifact_edited"
    if not compare_digest(digest, record.digest):
        return "artifact_edited"
    if signing_key is None:
        return None
    if record.signature is None:
        return "artifact_unsigned"
    if not compare_digest(sign_artifact(signing_key, digest), record.signature):
        return "artifact_bad_signature"
    return None


_REFUSED_ARTIFACTS = {
    "artifact_edited": "its bytes, MIME type, save time or metadata no longer hash to the "
                       "digest stored when it was saved",
    "artifact_bad_signature": "the signature of its record is not this key's",
    "artifact_unsigned": "its record carries no signature by this key (saved before the store "
                         "was keyed, or its signature was removed)",
    "artifact_unverified": "its record carries no digest (saved before revision 0020, or its "
                           "digest was removed)",
}
"""The problems for which a keyed store serves no version, with their reason: every problem
``artifact_problem`` names, so a keyed store serves only what its key vouches for."""


def check_served_artifact(record: ArtifactRecord, signing_key: bytes | None, *,
                          scope: str | None) -> None:
    """Raise TamperedArtifactError (``scope``: the session id the artifact is under, None for
    the user's) when a keyed store must not serve ``record``: ``artifact_problem`` names any
    problem (edited, a signature not the key's, no signature, no digest). Unkeyed, every
    version is served; ``evs verify`` reports the edited ones."""
    if signing_key is None:
        return
    problem = artifact_problem(record, signing_key)
    if problem is not None:
        raise TamperedArtifactError(scope, record.filename, record.version,
                                    reason=_REFUSED_ARTIFACTS[problem], problem=problem)


def seal_fork_link(signing_key: bytes | None, link: ForkLink) -> tuple[bytes, bytes | None]:
    """Return ``(link_hash, signature)`` of a fork link's row as a backend stores them
    (``eventstore._chain.fork_link_digest`` of the link, its ``session_id`` the fork's key;
    the signature None when unkeyed)."""
    digest = fork_link_digest(link.session_id, link.origin_session_id, link.origin_seq,
                              link.forked_at)
    return digest, None if signing_key is None else sign_fork_link(signing_key, digest)


def check_artifact_version(session_id: str, artifact: NewArtifact, version: int) -> None:
    """Raise ArtifactConflictError when ``artifact`` was stored as ``version``, not as the
    version it carries (every backend judges this by one rule, inside its transaction)."""
    if version != artifact.version:
        raise ArtifactConflictError(session_id, artifact.filename,
                                    expected_version=artifact.version, actual_version=version)
def same_event(stored: StoredEvent, event: NewEvent) -> bool:
    """Whether ``event`` is the event ``stored`` holds: same payload and the same envelope
    fields the payload does not repeat (author, invocation id, timestamp, kind, schema
    version). An event stored by an older schema version compares unequal to its re-encoding
    by this one, so retrying across such an upgrade raises DuplicateEventError."""
    return (
        stored.payload == event.payload
        and stored.schema_version == event.schema_version
        and stored.timestamp == event.timestamp
        and stored.author == event.author
        and stored.invocation_id == event.invocation_id
        and stored.kind == event.kind
    )


def check_batch_ids(session_id: str, events: Sequence[NewEvent]) -> None:
    """Raise DuplicateEventError when one batch repeats an event id."""
    if len(events) < 2:
        return
    seen: set[str] = set()
    for event in events:
        if event.event_id in seen:
            raise DuplicateEventError(
                f"Event id {event.event_id!r} appears twice in one batch for session "
                f"{session_id!r}.",
                session_id=session_id,
                event_id=event.event_id,
            )
        seen.add(event.event_id)

