"""Integrity checks of a session's log: pure functions of the stored rows and snapshots.

``evs verify`` reads; this module judges. Each finding names the session and, when it is about one
event, its seq, so a human can go straight to ``evs show SESSION --since SEQ``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventstore.backends.protocol import SessionRecord, StoredEvent

from .._chain import GENESIS, SIGNING_KEY_ENV
from .._chain_check import check_chain, signature_problems
from .._codec import event_kind
from .._events import Event, FunctionCall, FunctionResponse
from .._exceptions import CorruptEventError
from .._state import apply_actions, touches_shared_keys
from ._timeline import Timeline, analyze

__all__ = [
    "Finding", "answered_twice_message", "check_artifacts", "check_events", "check_log",
    "check_rows", "check_scope", "check_snapshots", "confirmation_mismatch_message",
    "confirmation_unknown_message", "duplicate_call_message", "orphan_message",
    "snapshot_finding",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One integrity problem."""

    session_id: str
    """Session the problem is in."""
    seq: int | None
    """Seq of the event concerned, or None when it is about the session as a whole."""
    code: str
    """Stable short name of the check that failed (for scripts)."""
    message: str
    """What is wrong, in one sentence."""

    def as_dict(self) -> dict[str, Any]:
        """Return the finding as a JSON-ready mapping."""
        return {"session_id": self.session_id, "seq": self.seq, "code": self.code,
                "message": self.message}


def check_log(
    session_id: str,
    rows: Sequence[StoredEvent],
    *,
    version: int,
    decode: Callable[[StoredEvent], Event],
    head: SessionRecord | None = None,
    signing_key: bytes | None = None,
    copied_through: int = 0,
) -> tuple[list[Finding], list[Event]]:
    """Check the stored rows of one session (oldest first) and return the findings together
    with the events that decoded (undecodable rows are findings, never skipped silently).

    The hash chain is checked too (``eventstore._chain_check``: the first place it breaks;
    ``head``, the session's record, also catches a removed tail), and with ``signing_key``
    every row's signature. Each row's ``shared_state`` flag must say what its payload says
    (does the state delta hold ``user:``/``app:`` keys?), except that the first
    ``copied_through`` rows of a fork are copies whose shared deltas count in the origin only
    (flag false)."""
    findings, events = check_rows(session_id, rows, version=version, decode=decode, head=head,
                                  signing_key=signing_key, copied_through=copied_through)
    return findings + check_events(session_id, events), events


def check_rows(
    session_id: str,
    rows: Sequence[StoredEvent],
    *,
    version: int | None,
    decode: Callable[[StoredEvent], Event],
    head: SessionRecord | None = None,
    signing_key: bytes | None = None,
    copied_through: int = 0,
    first_seq: int = 1,
    prev: bytes = GENESIS,
    following: StoredEvent | None = None,
    chain: bool = True,
    seen_ids: dict[str, int] | None = None,
) -> tuple[list[Finding], list[Event]]:
    """``check_log`` without what the decoded events say of each other (``check_events``),
    for a part of the log as well as all of it: the rows from ``first_seq`` on, chained to
    ``prev`` (the stored hash of the row before them, taken on trust; ``check_chain``);
    ``following`` (the row after them, when they do not end the log) lets a break at their
    last row be classified as in the whole log (a break at ``following`` itself is left to
    the part it starts). ``version`` None skips comparing the session's version with the newest row;
    ``chain=False`` skips the chain (a page after the one where it broke); ``seen_ids`` (event
    id -> seq, updated) carries the ids of the pages before, for ``duplicate_event_id``."""
    findings: list[Finding] = []

    def found(seq: int | None, code: str, message: str) -> None:
        findings.append(Finding(session_id=session_id, seq=seq, code=code, message=message))

    # A gap is a seq no row holds: a row stored elsewhere (its seq column edited, the hidden
    # row_key left) is out of order, not missing.
    expected = first_seq
    for seq in sorted({row.seq for row in rows}):
        if seq > expected:
            missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
            found(seq, "seq_gap", f"seq {missing} is missing before seq {seq}.")
        expected = seq + 1
    highest = first_seq - 1
    for row in rows:
        if row.seq <= highest:
            found(row.seq, "seq_order", f"seq {row.seq} appears again or out of order.")
        highest = max(highest, row.seq)
    newest = max((row.seq for row in rows), default=first_seq - 1)
    if version is not None and newest != version:
        found(None, "version_mismatch",
              f"the session's version is {version} but its newest event has seq {newest}.")

    stored_at: dict[str, int] = {} if seen_ids is None else seen_ids
    events: list[Event] = []
    for row in rows:
        prior = stored_at.setdefault(row.event_id, row.seq)
        if prior != row.seq:
            found(row.seq, "duplicate_event_id",
                  f"event id {row.event_id!r} is stored at seq {prior} and again at seq {row.seq}.")
        try:
            event = decode(row)
        except CorruptEventError as exc:
            found(row.seq, "undecodable", f"the stored event cannot be decoded: {exc.reason}")
            continue
        events.append(event)
        if event.id != row.event_id:
            found(row.seq, "envelope_mismatch",
                  f"the row's event id {row.event_id!r} differs from the payload's {event.id!r}.")
        if event_kind(event) != row.kind:
            found(row.seq, "kind_mismatch",
                  f"the row's kind {row.kind!r} differs from the payload's "
                  f"{event_kind(event)!r}.")
        shared = row.seq > copied_through and touches_shared_keys(event.actions)
        if row.shared_state != shared:
            found(row.seq, "shared_flag",
                  f"the row's shared_state flag is {row.shared_state} but its payload "
                  + ("is a fork's copy (false)." if row.seq <= copied_through else
                     f"{'changes' if shared else 'changes no'} user:/app: state."))

    # After the structural findings: they name the plainer cause first (e.g. ``seq_gap``).
    chained = [*rows, following] if following is not None else rows
    broken = check_chain(chained, head=head, signing_key=signing_key, first_seq=first_seq,
                         prev=prev) if chain else None
    if broken is not None and following is not None and broken.seq == following.seq:
        broken = None  # the next part's to report, with the rows around it to classify it
    if broken is not None:
        found(broken.seq, broken.code, broken.message)
    if signing_key is not None:
        _signature_findings(rows, signature_problems(session_id, rows, signing_key), found)
    return findings, events


def _signature_findings(rows: Sequence[StoredEvent], problems: Mapping[int, str],
                        found: Callable[[int | None, str, str], None]) -> None:
    """Report each wrong signature, and each run of unsigned rows once (a database keyed after
    it was written has many)."""
    run: list[int] = []

    def flush() -> None:
        if run:
            where = f"seq {run[0]}" if len(run) == 1 else f"seq {run[0]}..{run[-1]}"
            found(run[0], "unsigned", f"{where} carries no signature by this key: written "
                  "behind the store's back, or before the store was keyed (signatures are "
                  "never added afterwards: rows are never rewritten).")
            run.clear()

    # When no row checks out under the key, a wrong key explains the findings as well as
    # forgery does, and is the likelier of the two: say so.
    wrong_key = bool(problems) and all(row.seq in problems for row in rows)
    cause = (" it was forged or changed, or the key is not the one the store signed with "
             f"(no signature of this session matches: check {SIGNING_KEY_ENV})." if wrong_key
             else " it was forged or changed.")
    for row in rows:
        problem = problems.get(row.seq)
        if problem == "unsigned":
            run.append(row.seq)
            continue
        flush()
        if problem == "bad_signature":
            found(row.seq, "bad_signature", f"seq {row.seq}'s signature does not match its "
                  f"chain hash under this key:{cause}")
    flush()


def check_events(session_id: str, events: Sequence[Event],
                 timeline: Timeline | None = None) -> list[Finding]:
    """Check what the decoded events say (oldest first, ``seq`` set): responses without a
    call, reused call ids, calls answered twice, confirmations that do not match their call.
    ``timeline``: the analysis of the events already made (``events`` is then not read)."""
    findings: list[Finding] = []

    def found(seq: int | None, code: str, message: str) -> None:
        findings.append(Finding(session_id=session_id, seq=seq, code=code, message=message))

    timeline = analyze(events) if timeline is None else timeline
    for seq, response in timeline.orphan_responses:
        found(seq, "response_without_call", orphan_message(response))
    for seq, call in timeline.duplicate_calls:
        found(seq, "duplicate_call_id", duplicate_call_message(call, timeline.calls[call.id].seq))
    for record in timeline.calls.values():
        finals = [a for a in record.answers if not a.requests_confirmation]
        # Long-running calls may receive progress updates before their result.
        if len(finals) > 1 and not record.long_running:
            found(finals[1].seq, "answered_twice", answered_twice_message(
                record.call.id, record.call.name, record.seq, finals[0].seq, finals[1].seq))
    for confirmation in timeline.confirmations.values():
        original = confirmation.original
        cid = confirmation.confirmation_id
        target = timeline.calls.get(str(original.get("id")))
        if target is None or target.seq >= confirmation.seq:
            found(confirmation.seq, "confirmation_unknown_call",
                  confirmation_unknown_message(cid, original))
        elif target.call.name != original.get("name") or target.call.args != original.get("args"):
            found(confirmation.seq, "confirmation_call_mismatch", confirmation_mismatch_message(
                cid, original, target.call.id, target.call.name, target.call.args, target.seq))
    return findings


def orphan_message(response: FunctionResponse) -> str:
    """The message of ``response_without_call``."""
    return f"response {response.id!r} ({response.name}) answers no earlier call."


def duplicate_call_message(call: FunctionCall, first_seq: int) -> str:
    """The message of ``duplicate_call_id``: ``call`` reuses the id of the call at
    ``first_seq``."""
    return f"call id {call.id!r} was already used at seq {first_seq}."


def answered_twice_message(call_id: str, name: str, seq: int, first: int, second: int) -> str:
    """The message of ``answered_twice``: the call at ``seq`` has final answers at ``first``
    and ``second``."""
    return (f"call {call_id!r} ({name}, seq {seq}) is answered at seq {first} and again at "
            f"seq {second}.")


def confirmation_unknown_message(confirmation_id: str, original: Mapping[str, Any]) -> str:
    """The message of ``confirmation_unknown_call`` (``original``: the call as the request
    records it)."""
    return (f"confirmation {confirmation_id!r} is about call {original.get('id')!r}, which no "
            "earlier event made.")


def confirmation_mismatch_message(confirmation_id: str, original: Mapping[str, Any],
                                  call_id: str, name: str, args: Any, seq: int) -> str:
    """The message of ``confirmation_call_mismatch``: the request records ``original`` but the
    call at ``seq`` is ``name(args)``."""
    return (f"confirmation {confirmation_id!r} records call {call_id!r} as "
            f"{original.get('name')}({original.get('args')}) but the log has "
            f"{name}({args}) at seq {seq}.")


def check_snapshots(
    session_id: str, events: Sequence[Event], snapshots: Sequence[tuple[int, Mapping[str, Any]]]
) -> list[Finding]:
    """Compare each stored snapshot ``(seq, session state)`` with the full fold of the log."""
    findings: list[Finding] = []
    for snapshot_seq, snapshot in snapshots:
        folded: dict[str, Any] = {}
        for e in events:
            if e.seq is not None and e.seq <= snapshot_seq:
                apply_actions(folded, e.actions, scope="session")
        finding = snapshot_finding(session_id, snapshot_seq, folded, snapshot)
        if finding is not None:
            findings.append(finding)
    return findings


def snapshot_finding(session_id: str, seq: int, folded: Mapping[str, Any],
                     snapshot: Mapping[str, Any]) -> Finding | None:
    """The ``snapshot_mismatch`` finding when the snapshot at ``seq`` is not ``folded`` (the
    session state folded from the log up to ``seq``), else None."""
    if dict(folded) == dict(snapshot):
        return None
    missing = object()  # a key set to None differs from a key not set
    keys = sorted(
        k for k in set(folded) | set(snapshot)
        if folded.get(k, missing) != snapshot.get(k, missing)
    )
    return Finding(
        session_id=session_id,
        seq=seq,
        code="snapshot_mismatch",
        message=f"the state snapshot at seq {seq} differs from the fold of the "
        f"log in keys {', '.join(map(repr, keys))}.",
    )


def check_artifacts(
    session_id: str, events: Sequence[Event], stored: Mapping[str, Sequence[int]]
) -> list[Finding]:
    """Flag every ``artifact_delta`` entry and artifact part that names a version not in
    ``stored`` (filename -> versions of the session's and its user's artifacts)."""
    findings: list[Finding] = []
    for event in events:
        named = [(f, v, "artifact_delta") for f, v in event.actions.artifact_delta.items()]
        if event.content is not None:
            named += [(p.artifact.filename, p.artifact.version, "an artifact part")
                      for p in event.content.parts if p.artifact is not None]
        for filename, version, where in named:
            versions = stored.get(filename, ())
            if version in versions:
                continue
            have = (f"the stored versions are {', '.join(map(str, versions))}" if versions
                    else "no version of it is stored")
            findings.append(Finding(
                session_id=session_id,
                seq=event.seq,
                code="artifact_missing",
                message=f"{where} names artifact {filename!r} version {version}, which does "
                f"not exist ({have}).",
            ))
    return findings


def check_scope(
    session_id: str, app_name: str, user_id: str,
    mismatches: Sequence[tuple[int, str, str]], rows: Sequence[StoredEvent],
) -> list[Finding]:
    """Findings for the columns the ``user:``/``app:`` fold selects and orders by, which the
    hash chain does not cover: an event row whose app or user is not its session's
    (``scope_edited``: its shared-state delta would fold into another user's or app's state),
    and a shared-state row whose position is not after the one before it in seq order
    (``shared_order_edited``: the fold would apply the session's deltas out of order)."""
    findings = [
        Finding(session_id=session_id, seq=seq, code="scope_edited",
                message=f"seq {seq}'s row names app {app!r} and user {user!r}, not the session's "
                f"({app_name!r}, {user_id!r}): its user:/app: state change would count for "
                "another scope.")
        for seq, app, user in mismatches
    ]
    previous: StoredEvent | None = None
    for row in sorted((r for r in rows if r.shared_state), key=lambda r: r.seq):
        if previous is not None and row.position <= previous.position:
            findings.append(Finding(
                session_id=session_id, seq=row.seq, code="shared_order_edited",
                message=f"seq {row.seq}'s shared-state position {row.position} is not after seq "
                f"{previous.seq}'s ({previous.position}): the user:/app: fold would apply "
                "them out of order."))
        previous = row
    return findings
