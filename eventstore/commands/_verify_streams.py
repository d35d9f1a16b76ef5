"""Integrity checks of the shared-state streams (``eventstore._scopes``).

Two kinds of check. ``check_stream`` checks one stream as stored: its hash chain (the scope is
bound into every entry's digest, so an entry moved to another scope, renumbered or edited
breaks it), its head record, and in keyed mode every entry's and the head's signature.
``check_origins`` checks a session's events against the entries that carry their deltas:
every shared-state event (but a fork's copies) must have its entry in each stream it touches,
for its session's app and user, with the same delta, event id and position. Entries whose
session is gone are checked by their chain alone (they outlive it on purpose).

Findings about one entry name its origin event (session id and seq, which may no longer
exist) and the stream in the message; findings about a stream as a whole name it in
``session_id`` as ``stream_label`` says. The check functions are pure; ``StreamCheck`` reads
the streams for one run of ``evs verify`` and carries what the sessions' checks found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from eventstore.backends.protocol import Backend, StoredEvent

from .._chain import scope_digest, sign_scope_entry, sign_scope_head
from .._chain_check import check_chain
from .._events import Event
from .._scopes import APP_SCOPE, ScopeEntry, ScopeHead, scope_deltas
from .._state import touches_shared_keys
from ._verify import Finding

__all__ = ["OriginIndex", "StreamCheck", "check_origins", "check_stream", "stream_label"]

_KINDS = {
    "chain_edited": "stream_edited", "chain_inserted": "stream_inserted",
    "chain_deleted": "stream_deleted", "chain_reordered": "stream_reordered",
    "tail_removed": "stream_deleted", "head_mismatch": "stream_head_mismatch",
    "chain_broken": "stream_broken",
}
"""The code of a stream's chain break, by the session chain's code for the same kind."""


def stream_label(app_name: str, user_id: str) -> str:
    """How a finding names a stream: ``app:APP`` or ``user:APP/USER``."""
    return f"app:{app_name}" if user_id == APP_SCOPE else f"user:{app_name}/{user_id}"


def _scope_words(app_name: str, user_id: str) -> str:
    return (f"the app:-state stream of app {app_name!r}" if user_id == APP_SCOPE
            else f"the user:-state stream of user {user_id!r} in app {app_name!r}")


@dataclass(frozen=True, slots=True)
class _Link:
    """An entry as the chain check reads it: its stream seq as its place."""

    seq: int
    chain_hash: bytes | None
    entry: ScopeEntry


def _digest(link: Any) -> bytes | None:
    e: ScopeEntry = link.entry
    try:
        return scope_digest(e.app_name, e.user_id, session_id=e.session_id,
                            event_id=e.event_id, seq=e.seq, position=e.position, delta=e.delta)
    except (ValueError, TypeError, AttributeError, OverflowError):
        return None  # a column a hand edit filled with something else


def _entry_finding(entry: ScopeEntry, code: str, message: str) -> Finding:
    return Finding(session_id=entry.session_id, seq=entry.seq, code=code, message=message)


def check_stream(
    app_name: str, user_id: str, entries: Sequence[ScopeEntry], head: ScopeHead | None, *,
    signing_key: bytes | None, vouched: frozenset[tuple[str, str, int]] = frozenset(),
) -> list[Finding]:
    """Check one stream's entries (as stored) and head record: the first place its chain
    breaks, with its kind (``stream_edited``, ``stream_inserted``, ``stream_deleted``,
    ``stream_reordered``, ``stream_head_mismatch``, ``stream_broken``), and with
    ``signing_key`` each entry's signature (``stream_bad_signature``; ``stream_unsigned`` for
    an entry without one, unless a validly signed entry after it seals it or ``vouched`` holds
    its ``(app, user, stream seq)``: an entry migrated from before the streams whose signed
    origin event says the same) and the head's."""
    label = stream_label(app_name, user_id)
    where = _scope_words(app_name, user_id)
    findings: list[Finding] = []
    links = [_Link(e.stream_seq, e.chain_hash, e) for e in entries]
    broken = check_chain(links, head=head, digest=_digest)
    if broken is not None:
        at = next((link.entry for link in links if link.seq == broken.seq), None)
        message = (f"{where}, entry {broken.seq}: "
                   + broken.message.replace("the session's head record", "the stream's head "
                                            "record").replace("seq ", "entry "))
        findings.append(Finding(session_id=at.session_id if at else label,
                                seq=at.seq if at else None,
                                code=_KINDS.get(broken.code, "stream_broken"), message=message))
    ordered = sorted(entries, key=lambda e: e.stream_seq)
    for before, after in pairwise(ordered):
        if after.position <= before.position:
            findings.append(_entry_finding(after, "stream_reordered", (
                f"{where}, entry {after.stream_seq}: its event's position {after.position} is "
                f"not after entry {before.stream_seq}'s ({before.position}): the stream "
                "applies them out of the order they were made.")))
            break
    if signing_key is None:
        return findings
    signed_ok = {e.stream_seq for e in entries if e.chain_hash is not None
                 and e.signature is not None
                 and sign_scope_entry(signing_key, app_name, user_id, e.chain_hash)
                 == e.signature}
    # A signed entry whose chain checks out up to it vouches for every entry before it: its
    # signature covers its chain hash, which covers theirs (how migrated entries get sealed).
    sealed = max((n for n in signed_ok if broken is None or n < broken.seq), default=0)
    for e in entries:
        if e.signature is None:
            if e.stream_seq > sealed and (e.app_name, e.user_id, e.stream_seq) not in vouched:
                findings.append(_entry_finding(
                    e, "stream_unsigned", f"{where}, entry {e.stream_seq}, carries no signature "
                    "by this key and no signed event vouches for it: written behind the "
                    "store's back, or migrated from before the streams from a session that is "
                    "gone."))
        elif e.stream_seq not in signed_ok:
            findings.append(_entry_finding(
                e, "stream_bad_signature", f"{where}, entry {e.stream_seq}: its signature does "
                "not match under this key: it was forged or changed."))
    newest = ordered[-1] if ordered else None
    if head is not None and head.head_hash is not None and (
            (head.head_signature is not None and sign_scope_head(
                signing_key, app_name, user_id, head.head_seq, head.head_hash)
            != head.head_signature)
            # Unsigned heads are migrated ones; a keyed append signs both head and entry.
            or (head.head_signature is None and newest is not None
            and newest.signature is not None)):
        findings.append(Finding(session_id=label, seq=None, code="stream_head_mismatch",
                                message=f"{where}: its head record's signature does not match "
                                "under this key: it was moved behind the store's back."))
    return findings


OriginIndex = Mapping[tuple[str, int], Sequence[ScopeEntry]]
"""The entries of the streams read, by their origin ``(session id, seq)``."""


def check_origins(
    session_id: str, app_name: str, user_id: str, rows: Sequence[StoredEvent],
    events: Sequence[Event], index: OriginIndex, *, copied_through: int = 0,
    claimed: set[tuple[str, str, int]] | None = None,
    vouched: set[tuple[str, str, int]] | None = None,
) -> list[Finding]:
    """Check the session's events against the stream entries that carry their ``user:`` and
    ``app:`` changes: a missing entry (``stream_entry_missing``), an entry in another scope's
    stream than the session's (``stream_scope_edited``), or one whose delta, event id or
    position is not the event's (``stream_origin_mismatch``). Each entry matched is added to
    ``claimed``; one without a signature matched by a signed event is added to ``vouched``."""
    findings: list[Finding] = []
    by_seq = {e.seq: e for e in events}
    signed = {r.seq for r in rows if r.signature is not None}
    for row in rows:
        event = by_seq.get(row.seq)
        if event is None or row.seq <= copied_through:
            continue  # undecodable (a finding already), or a fork's copy (no entry of its own)
        found = list(index.get((session_id, row.seq), ()))
        if not touches_shared_keys(event.actions):
            if found:
                findings.append(_entry_finding(found[0], "stream_origin_mismatch", (
                    f"{_scope_words(found[0].app_name, found[0].user_id)}, entry "
                    f"{found[0].stream_seq}, names seq {row.seq}, which changes no "
                    "user:/app: state.")))
            continue
        app_delta, user_delta = scope_deltas(event.actions)
        for scope_user, delta in ((APP_SCOPE, app_delta), (user_id, user_delta)):
            if delta is None:
                continue
            kind = "app:" if scope_user == APP_SCOPE else "user:"
            mine = [e for e in found if e.app_name == app_name and e.user_id == scope_user]
            if not mine:
                elsewhere = [e for e in found if e.user_id != APP_SCOPE] if kind == "user:" \
                    else [e for e in found if e.user_id == APP_SCOPE]
                if elsewhere:
                    other = elsewhere[0]
                    findings.append(Finding(
                        session_id=session_id, seq=row.seq, code="stream_scope_edited",
                        message=f"seq {row.seq}'s {kind} change is entry {other.stream_seq} "
                        f"of {_scope_words(other.app_name, other.user_id)}, not of the "
                        f"session's ({app_name!r}, {user_id!r}): the session's or the "
                        "entry's scope was changed behind the store's back."))
                    if claimed is not None:
                        claimed.add((other.app_name, other.user_id, other.stream_seq))
                else:
                    findings.append(Finding(
                        session_id=session_id, seq=row.seq, code="stream_entry_missing",
                        message=f"seq {row.seq} changes {kind} state but "
                        f"{_scope_words(app_name, scope_user)} holds no entry for it: it was "
                        "removed (or the session's scope was changed) behind the store's "
                        "back."))
                continue
            exact = [e for e in mine if e.delta == delta and e.event_id == row.event_id
                     and e.position == row.position]
            entry = exact[-1] if exact else mine[0]
            if claimed is not None:
                claimed.add((entry.app_name, entry.user_id, entry.stream_seq))
                # A session deleted and made again under its key (pruned, then its archive
                # imported) wrote the same change once per life: the older entries, same event
                # and delta earlier in the stream (which is chained), are its earlier life's.
                claimed.update((e.app_name, e.user_id, e.stream_seq) for e in mine
                               if exact and e.stream_seq < entry.stream_seq
                               and e.event_id == row.event_id and e.delta == delta)
            if entry.delta != delta or entry.event_id != row.event_id \
                    or entry.position != row.position:
                what = ("delta" if entry.delta != delta else
                        "event id" if entry.event_id != row.event_id else "position")
                findings.append(_entry_finding(entry, "stream_origin_mismatch", (
                    f"{_scope_words(app_name, scope_user)}, entry {entry.stream_seq}: its "
                    f"{what} is not seq {row.seq}'s: one of them was changed behind the "
                    "store's back.")))
            elif vouched is not None and entry.signature is None and row.seq in signed:
                vouched.add((entry.app_name, entry.user_id, entry.stream_seq))
    return findings


class StreamCheck:
    """The streams ``evs verify`` reads for a run, and what the sessions' checks learned of
    them (which entries an event claimed, which a signed event vouched for)."""

    def __init__(self, heads: Sequence[ScopeHead],
                 entries: Mapping[tuple[str, str], Sequence[ScopeEntry]]) -> None:
        self.heads = {(h.app_name, h.user_id): h for h in heads}
        self.entries = dict(entries)
        self.index: dict[tuple[str, int], list[ScopeEntry]] = {}
        for stream in self.entries.values():
            for entry in stream:
                self.index.setdefault((entry.session_id, entry.seq), []).append(entry)
        self.claimed: set[tuple[str, str, int]] = set()
        self.vouched: set[tuple[str, str, int]] = set()

    @classmethod
    async def read(cls, backend: Backend,
                   scopes: Sequence[tuple[str, str]] | None) -> StreamCheck:
        """Read the streams of ``scopes`` ``(app, user or APP_SCOPE)``, or every stream."""
        heads: list[ScopeHead] = await backend.scope_heads()
        wanted = ([(h.app_name, h.user_id) for h in heads] if scopes is None
                  else list(dict.fromkeys(scopes)))
        entries = {
            (app, user): await backend.read_scope(
                app_name=app, user_id=None if user == APP_SCOPE else user, after=0,
                upto_position=None)
            for app, user in wanted
        }
        return cls([h for h in heads if (h.app_name, h.user_id) in entries], entries)

    def session(self, session_id: str, app_name: str, user_id: str,
                rows: Sequence[StoredEvent], events: Sequence[Event], *,
                copied_through: int) -> list[Finding]:
        """``check_origins`` of one session against the streams read."""
        return check_origins(session_id, app_name, user_id, rows, events, self.index,
                             copied_through=copied_through, claimed=self.claimed,
                             vouched=self.vouched)

    def streams(self, *, signing_key: bytes | None,
                checked_sessions: set[str]) -> list[Finding]:
        """Every stream's ``check_stream``, and a ``stream_origin_mismatch`` for each entry
        naming one of ``checked_sessions`` (existing sessions whose events were checked) that
        no event of it claimed."""
        findings: list[Finding] = []
        for (app, user), entries in sorted(self.entries.items()):
            findings += check_stream(app, user, entries, self.heads.get((app, user)),
                                     signing_key=signing_key, vouched=frozenset(self.vouched))
            for e in entries:
                if e.session_id in checked_sessions and (
                        e.app_name, e.user_id, e.stream_seq) not in self.claimed:
                    findings.append(_entry_finding(e, "stream_origin_mismatch", (
                        f"{_scope_words(app, user)}, entry {e.stream_seq}, names seq {e.seq} "
                        f"(event {e.event_id!r}) of session {e.session_id!r}, which holds no "
                        "such user:/app: change there.")))
        return findings
