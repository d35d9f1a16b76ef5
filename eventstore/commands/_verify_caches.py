"""``evs verify``'s checks of what lives beside the logs: the scopes' snapshots, the artifact
versions, the fork links and the apps' position counters.

Each is recomputed from the log (or from the record the store sealed the row with) and compared
with what is stored; a difference is a finding with a stable code:

- ``shared_snapshot_mismatch`` / ``shared_snapshot_undecodable``: a ``user:``/``app:`` snapshot
  that the log still binds (its stream entry holds the chain hash it names) but whose state is
  not the fold of the stream's entries up to it (it was edited: readers would serve it
  unkeyed; a keyed store folds the stream instead, its MAC fails);
- ``artifact_edited`` (its bytes, MIME type, save time or metadata no longer hash to its stored
  digest), ``artifact_bad_signature``, ``artifact_unsigned`` (keyed: saved before the key, or
  its signature removed), ``artifact_unverified`` (no digest: saved before revision 0020 by an
  older version, or its digest removed); a keyed store serves none of them, and
  ``evs db sign-artifacts`` adopts the last two (``_sign_artifacts``);
- ``fork_link_edited`` (the link no longer hashes to its stored digest, or its origin's event at
  the fork's seq is not the event the fork copied), ``fork_link_bad_signature``,
  ``fork_link_unsigned`` (keyed: made before the key, and its origin is gone, so no signed
  event vouches for it), ``fork_link_unverified`` (no digest);
- ``app_position_lowered``: an app's position counter is below a position its log holds (the
  next shared-state append would take a taken one; appends derive it from the log meanwhile).
"""

from __future__ import annotations

from collections.abc import Sequence
from hmac import compare_digest
from typing import Any

from eventstore.backends.protocol import Backend, artifact_problem

from .._chain import fork_link_digest, sign_fork_link
from .._exceptions import CorruptSnapshotError
from .._fork import ForkLink
from .._scopes import APP_SCOPE, apply_scope_delta
from .._statefold import snapshot_state
from ._verify import Finding
from ._verify_streams import StreamCheck, stream_label

__all__ = ["app_position_findings", "artifact_findings", "fork_link_findings",
           "shared_snapshot_findings"]

_ARTIFACT_WORDS = {
    "artifact_edited": "its bytes, MIME type, save time or metadata were changed after it was "
                       "saved (they no longer hash to its stored digest)",
    "artifact_bad_signature": "its record's signature does not match under this key: it was "
                              "forged or changed",
    "artifact_unsigned": "it carries no signature by this key: saved before the store was "
                         "keyed, or its signature was removed (a keyed store refuses it until "
                         "evs db sign-artifacts vouches for it)",
    "artifact_unverified": "it carries no digest: saved by a version older than revision "
                           "0020, or its digest was removed (a keyed store refuses it until "
                           "evs db sign-artifacts vouches for it)",
}


async def shared_snapshot_findings(backend: Backend, streams: StreamCheck) -> list[Finding]:
    """Compare every snapshot of the streams ``streams`` read that the log still binds with
    the fold of its stream's entries ``1..count``."""
    findings: list[Finding] = []
    for (app, user), entries in sorted(streams.entries.items()):
        ordered = sorted(entries, key=lambda e: e.stream_seq)
        label = stream_label(app, user)
        cursor: int | None = None
        while True:
            snapshot = await backend.load_shared_snapshot(
                app_name=app, user_id=None if user == APP_SCOPE else user, upto_position=cursor)
            if snapshot is None:
                break
            cursor = snapshot.position - 1
            try:
                stored = snapshot_state(snapshot.state, session_id=None, seq=None, scope=label)
            except CorruptSnapshotError as exc:
                findings.append(Finding(
                    session_id=label, seq=None, code="shared_snapshot_undecodable",
                    message=f"the snapshot of {label} at entry {snapshot.count} cannot be "
                    f"decoded: {exc.reason}"))
                continue
            folded: dict[str, Any] = {}
            for entry in ordered[:snapshot.count]:
                try:
                    apply_scope_delta(folded, entry.delta)
                except (ValueError, TypeError, AttributeError, KeyError):
                    break  # the stream's own check names the entry
            if folded != stored:
                keys = sorted(k for k in set(folded) | set(stored)
                              if folded.get(k, _MISSING) != stored.get(k, _MISSING))
                findings.append(Finding(
                    session_id=label, seq=None, code="shared_snapshot_mismatch",
                    message=f"the snapshot of {label} at entry {snapshot.count} (position "
                    f"{snapshot.position}) differs from the fold of its stream in keys "
                    f"{', '.join(map(repr, keys))}: it was changed behind the store's back."))
    return findings


_MISSING = object()


async def artifact_findings(
    backend: Backend, session_id: str, *, app_name: str, user_id: str, scope: str,
    user_scope: bool = True,
) -> list[Finding]:
    """Check every stored version of the session's artifacts (``scope``: the id its app gave
    it) and, with ``user_scope``, of its user's, against the record each row was sealed with
    (``eventstore.store.artifacts.artifact_problem``). Findings name ``session_id``."""
    findings: list[Finding] = []
    key = backend.signing_key
    for where in ((scope, None) if user_scope else (scope,)):
        listed = await backend.list_artifacts(app_name=app_name, user_id=user_id,
                                              session_id=where)
        for filename, versions in listed.items():
            for version in versions:
                record = await backend.load_artifact(app_name=app_name, user_id=user_id,
                                                     session_id=where, filename=filename,
                                                     version=version)
                problem = None if record is None else artifact_problem(record, key)
                if problem is None:
                    continue
                owner = "the user's" if where is None else "the session's"
                findings.append(Finding(
                    session_id=session_id, seq=None, code=problem,
                    message=f"version {version} of {owner} artifact {filename!r}: "
                    f"{_ARTIFACT_WORDS[problem]}."))
    return findings


async def fork_link_findings(backend: Backend, session_key: str, given: str) -> list[Finding]:
    """Check the fork link of the session stored under ``session_key`` (if it is a fork):
    its stored digest (and, keyed, signature), and, when its origin still exists, that the
    origin's event at the fork's seq is the one the fork copied (same chain hash)."""
    links = [link for link in await backend.fork_links(session_key)
             if link.session_id == session_key]
    findings: list[Finding] = []
    for link in links:
        code, why = _link_problem(link, backend.signing_key)
        if code is None or code == "fork_link_unsigned":
            # A link recorded before the key (or migrated): its origin's event vouches for it.
            origin_code, origin_why, vouched = await _origin_problem(backend, link)
            if origin_code is not None or vouched:
                code, why = origin_code, origin_why
        if code is not None:
            findings.append(Finding(
                session_id=given, seq=None, code=code,
                message=f"its fork link (from session {link.origin_session_id!r} at seq "
                f"{link.origin_seq}) {why}."))
    return findings


def _link_problem(link: ForkLink, key: bytes | None) -> tuple[str | None, str]:
    if link.link_hash is None:
        return "fork_link_unverified", ("carries no digest: recorded by an older version, or "
                                        "its digest was removed")
    try:
        digest = fork_link_digest(link.session_id, link.origin_session_id, link.origin_seq,
                                  link.forked_at)
    except (ValueError, TypeError):
        digest = b""
    if not compare_digest(digest, link.link_hash):
        return "fork_link_edited", ("was changed after the fork was made (it no longer hashes "
                                    "to its stored digest)")
    if key is None:
        return None, ""
    if link.signature is None:
        return "fork_link_unsigned", ("carries no signature by this key: made before the "
                                      "store was keyed, or its signature was removed")
    if not compare_digest(sign_fork_link(key, digest), link.signature):
        return "fork_link_bad_signature", ("has a signature that does not match under this "
                                           "key: it was forged or changed")
    return None, ""


async def _origin_problem(backend: Backend,
                          link: ForkLink) -> tuple[str | None, str, bool]:
    """``(code, why, vouched)``: whether the origin's event at the fork's seq disagrees with
    the fork's copy, and whether it exists and agrees (it vouches for the link then)."""
    origin = await backend.get_session(link.origin_session_id)
    if origin is None or origin.version < link.origin_seq or link.origin_seq < 1:
        return None, "", False  # the origin is gone (or shorter): only the link's own seal
    mine = await backend.read(link.session_id, after=link.origin_seq - 1, upto=link.origin_seq,
                              backwards=False, limit=1)
    theirs = await backend.read(link.origin_session_id, after=link.origin_seq - 1,
                                upto=link.origin_seq, backwards=False, limit=1)
    if mine and theirs and mine[0].chain_hash != theirs[0].chain_hash:
        return "fork_link_edited", (f"names an origin whose event at seq {link.origin_seq} "
                                    "is not the one the fork copied: the link was changed"), False
    return None, "", bool(mine and theirs)


async def app_position_findings(backend: Backend,
                                apps: Sequence[str] | None = None) -> list[Finding]:
    """An ``app_position_lowered`` finding for each app (of ``apps``, or every one) whose
    position counter is below the highest position its log holds."""
    findings: list[Finding] = []
    for app, counter, highest in await backend.app_positions():
        if apps is not None and app not in apps:
            continue
        if counter is None or counter < highest:
            have = "no counter" if counter is None else f"counter {counter}"
            findings.append(Finding(
                session_id=f"app:{app}", seq=None, code="app_position_lowered",
                message=f"app {app!r} has position {have} but its log holds position "
                f"{highest}: the counter was lowered behind the store's back (appends take "
                "the log's highest instead; the next shared-state append restores it)."))
    return findings
