"""State folding for the store façade: decoding stored rows, and state at a seq via snapshots.

State is the fold of the stored state deltas (the rule is in ``eventstore._state``). Reading it
from scratch replays the whole log, so the folder keeps snapshots — a cache the backend may drop —
of each session's own state every ``snapshot_interval`` events, and of each ``user:``/``app:``
scope every ``snapshot_interval`` entries of its stream (``eventstore._scopes``: shared
state is folded from the streams only, never from sessions' events). A fold through snapshots
always equals a full replay (``session_state_fold`` is the reference). Knows no SQL: it uses
the Backend protocol.

Every cache it reads is bound to what it folded (the chain hash of the event at its seq, or of
the stream entry at its count): backends return only the caches whose event or entry still
holds that hash, and on a keyed store the folder also checks the cache's MAC
(``eventstore._chain``) and folds the log instead of a cache without a valid one (never
serving it), writing a signed one in its place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from hmac import compare_digest
from itertools import islice
from operator import gt, lt
from typing import Any, TypeVar

import orjson

from ._chain import sign_head_state, sign_shared_snapshot
from ._codec import SCHEMA_VERSION, _upcast, decode_event, decode_trusted
from ._events import Event
from ._exceptions import CorruptEventError, CorruptSnapshotError
from ._gcpause import pause as pause_collector
from ._gcpause import resume as resume_collector
from ._scopes import APP_SCOPE, apply_scope_delta
from ._state import APP_PREFIX, USER_PREFIX, apply_actions, apply_delta, session_part
from ._stored import (
    STORED_SCHEMA_VERSION,
    compact_fields,
    compact_mapping,
    compact_state_change,
    decode_compact,
    encode_compact,
)
from .backends.protocol import (
    Backend,
    EventRow,
    HeadState,
    ScopeEntry,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
)

__all__ = [
    "DEFAULT_SNAPSHOT_INTERVAL",
    "FOLD_PAGE",
    "StateFolder",
    "decode_all",
    "decode_mappings",
    "decode_row_mappings",
    "decode_stored",
    "fold_session_rows",
    "in_seq_order",
    "snapshot_state",
]

R = TypeVar("R", StoredEvent, EventRow)

DEFAULT_SNAPSHOT_INTERVAL = 200
"""A snapshot of session state is kept every this many events, and one of each ``user:`` and
``app:`` scope every this many shared-state events (a state read replays at most about this many
deltas per scope)."""


def decode_stored(stored: StoredEvent) -> Event:
    """Decode one stored envelope; raises CorruptEventError naming session and seq."""
    if stored.damage is not None:
        raise CorruptEventError(stored.session_id, stored.seq, stored.damage + ".")
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
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptEventError(stored.session_id, stored.seq, repr(exc)) from exc


def snapshot_state(
    data: bytes, *, session_id: str | None, seq: int | None, scope: str | None = None
) -> dict[str, Any]:
    """Decode a stored state snapshot; raises CorruptSnapshotError naming session and seq."""
    try:
        state = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        reason = f"it is not JSON ({exc})."
    else:
        if isinstance(state, dict):
            return state
        reason = f"it holds a JSON {type(state).__name__}, not an object."
    if scope is not None:
        reason = f"the shared snapshot of {scope} it reads: {reason}"
    raise CorruptSnapshotError(session_id, seq, reason)


def in_seq_order(
    session_id: str, rows: list[R], *, after: int | None = None, upto: int | None = None,
    backwards: bool = False,
) -> list[R]:
    """Return ``rows`` (one range read of the session: ``StoredEvent``s or ``EventRow``s) when
    their seqs rise strictly (fall, ``backwards``) within ``after < seq <= upto``; else raise
    CorruptEventError at the first row out of place.

    Backends return a session's rows in the order of their hidden key, which holds the seq the
    store wrote; a hand edit of the ``seq`` column (two seqs swapped, a row copied in) does not
    move a row, so the order and the seqs disagree. No reader gets events out of order: the
    read fails, and ``evs verify`` (which checks the rows as stored) names the damage."""
    if not rows:
        return rows
    items: list[Any] = rows
    seqs: list[int] = ([r.seq for r in items] if type(items[0]) is StoredEvent
                       else [r[0] for r in items])
    low = 0 if after is None else after
    high = (1 << 63) if upto is None else upto
    first, last = (seqs[-1], seqs[0]) if backwards else (seqs[0], seqs[-1])
    ordered = gt if backwards else lt
    if low < first and last <= high and (
        # Sorted and gap-free (every untouched log): strictly ordered, checked at C speed.
        (last - first == len(seqs) - 1 and seqs == sorted(seqs, reverse=backwards))
        or all(map(ordered, seqs, islice(seqs, 1, None)))
    ):
        return rows
    previous: int | None = None
    for seq in seqs:
        if not low < seq <= high or (previous is not None and not ordered(previous, seq)):
            near = f"next to seq {previous}" if previous is not None else (
                f"in a read of the seqs {low + 1}..{upto}" if upto is not None else
                f"in a read of the seqs after {low}")
            raise CorruptEventError(
                session_id, seq,
                f"it is stored out of seq order ({near}): its seq was changed behind the "
                f"store's back. `evs verify {session_id}` names the damage.")
        previous = seq
    raise AssertionError("unreachable: the fast check failed on rows in order")  # pragma: no cover


def decode_all(rows: Sequence[StoredEvent]) -> list[Event]:
    """Decode stored envelopes in order; raises CorruptEventError at the first bad one."""
    # Decoding allocates many small objects the caller keeps (see _gcpause).
    paused = pause_collector(len(rows))
    try:
        return [decode_stored(row) for row in rows]
    finally:
        resume_collector(paused)


def decode_row_mappings(
    session_id: str, rows: Sequence[EventRow], *, compact: bool = False,
    convert: Callable[[dict[str, Any]], Any] | None = None,
) -> list[Any] | None:
    """``decode_mappings`` of rows read with ``Backend.read_rows``, or None when a row is of
    an older schema version (the caller then reads StoredEvents, which upcast)."""
    out: list[Any] = []
    paused = pause_collector(len(rows))  # as in decode_all
    decode = compact_fields if compact else compact_mapping
    try:
        for seq, event_id, invocation_id, author, timestamp, version, payload in rows:
            if version != STORED_SCHEMA_VERSION:
                return None
            try:
                mapping = decode(payload, event_id=event_id, author=author,
                                 invocation_id=invocation_id, timestamp=timestamp, seq=seq)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise CorruptEventError(session_id, seq, repr(exc)) from exc
            out.append(mapping if convert is None else convert(mapping))
    finally:
        resume_collector(paused)
    return out


def decode_mappings(
    rows: Sequence[StoredEvent], *, compact: bool = False,
    convert: Callable[[dict[str, Any]], Any] | None = None,
) -> list[Any]:
    """Decode stored envelopes into plain mappings (upcast, ``seq`` set, not validated);
    raises CorruptEventError at the first payload that is not a JSON object. ``compact``:
    each in the stored encoding of schema version 2 instead (``compact_fields``; rows of
    older versions are re-encoded). ``convert``, when given, is applied to each mapping as it
    is decoded (in the same pass; long reads as in ``decode_all``), and the list
    holds what it returned; what it raises propagates as is."""
    out: list[Any] = []
    paused = pause_collector(len(rows))  # as in decode_all
    try:
        for row in rows:
            if row.damage is not None:
                raise CorruptEventError(row.session_id, row.seq, row.damage + ".")
            try:
                if compact:
                    if row.schema_version == STORED_SCHEMA_VERSION:
                        payload = row.payload
                    else:
                        payload = encode_compact(decode_stored(row))
                    mapping = compact_fields(
                        payload, event_id=row.event_id, author=row.author,
                        invocation_id=row.invocation_id, timestamp=row.timestamp, seq=row.seq,
                    )
                elif row.schema_version == STORED_SCHEMA_VERSION:
                    mapping = compact_mapping(
                        row.payload, event_id=row.event_id, author=row.author,
                        invocation_id=row.invocation_id, timestamp=row.timestamp, seq=row.seq,
                    )
                else:
                    mapping = orjson.loads(row.payload)
                    if not isinstance(mapping, dict):
                        raise ValueError("the payload is not a JSON object")
                    if row.schema_version != SCHEMA_VERSION:
                        mapping = _upcast(mapping, row.schema_version)
                    mapping["seq"] = row.seq
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise CorruptEventError(row.session_id, row.seq, repr(exc)) from exc
            out.append(mapping if convert is None else convert(mapping))
    finally:
        resume_collector(paused)
    return out


def _scope_name(app_name: str, user_id: str | None) -> str:
    return f"user:{user_id!r}" if user_id is not None else f"app:{app_name!r}"


def fold_session_rows(state: dict[str, Any], rows: Sequence[StoredEvent]) -> None:
    """Apply the session-scoped state changes of ``rows`` (in seq order) to ``state``: for
    rows in the stored encoding only their actions are read (``compact_state_change``, many
    times cheaper than decoding each event), others are decoded. Raises CorruptEventError as
    decoding would."""
    for row in rows:
        if row.damage is not None or row.schema_version != STORED_SCHEMA_VERSION:
            apply_actions(state, decode_stored(row).actions, scope="session")
            continue
        try:
            change = compact_state_change(row.payload)
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise CorruptEventError(row.session_id, row.seq, repr(exc)) from exc
        if change is not None:
            delta, deletions = change
            apply_delta(state, session_part(delta),
                        deleted=[k for k in deletions
                                 if not k.startswith((USER_PREFIX, APP_PREFIX))])


FOLD_PAGE = 1000
"""Events read per step when the session state is folded from a snapshot (or seq 0) on."""


_LISTING_SCOPE_SNAPSHOT = 32
"""Stream entries past a scope's snapshot from which a listing saves a new snapshot."""

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
        if snapshot is not None and not self._trusted_state(sid, snapshot):
            snapshot = None  # a keyed store folds the log (evs verify names a wrong row)
        base_seq, state = (0, {}) if snapshot is None else (
            snapshot.seq, snapshot_state(snapshot.state, session_id=sid, seq=snapshot.seq)
        )
        newest: StoredEvent | None = None
        after = base_seq
        while after < at:  # a page at a time: a long tail is never held whole
            page = in_seq_order(sid, await backend.read(sid, after=after, upto=at,
                                                         backwards=False, limit=FOLD_PAGE),
                                after=after, upto=at)
            for event in decode_all(page):
                apply_actions(state, event.actions, scope="session")
            if len(page) < FOLD_PAGE:
                newest = page[-1] if page else newest
                break
            newest, after = page[-1], page[-1].seq
        if at == record.version and at - base_seq >= self._snapshot_interval \
                and newest is not None and newest.seq == at and newest.chain_hash is not None:
            await backend.save_snapshot(sid, self._signed_state(sid, newest, orjson.dumps(state)))
        position: int | None = None
        if at < record.version:
            position = newest.position if newest else await self._position_of(sid, at)
        if at == 0 and record.version > 0:
            return state
        for user_id in (None, record.user_id):
            state.update(await self._shared_state(record.app_name, user_id, upto=position,
                                                  session_id=sid))
        return state

    async def _shared_state(
        self, app_name: str, user_id: str | None, *, upto: int | None, session_id: str | None
    ) -> dict[str, Any]:
        """The ``app:`` state of the app (``user_id`` None) or the ``user:`` state of the user,
        folded up to global position ``upto``: the newest snapshot at or below it plus the
        scope's stream entries after the snapshot."""
        backend = self._backend
        snapshot = await backend.load_shared_snapshot(
            app_name=app_name, user_id=user_id, upto_position=upto
        )
        distrusted = snapshot is not None and not self._trusted_shared(app_name, user_id,
                                                                       snapshot)
        if distrusted:
            snapshot = None
        entries = await backend.read_scope(
            app_name=app_name, user_id=user_id,
            after=0 if snapshot is None else snapshot.count, upto_position=upto
        )
        return await self._fold_scope(app_name, user_id, snapshot, entries,
                                      session_id=session_id, save_after=1 if distrusted else None)

    async def _fold_scope(
        self, app_name: str, user_id: str | None, snapshot: SharedSnapshot | None,
        entries: Sequence[ScopeEntry], *, session_id: str | None, save_after: int | None = None,
    ) -> dict[str, Any]:
        """Fold a scope's stream ``entries`` (those after ``snapshot``, in stream order) onto
        the snapshot, saving a new snapshot when at least ``save_after`` (default: the
        snapshot interval) were folded."""
        # Keyed by its stream seq (``count``); found by the position of its newest entry.
        base_count, state = (
            (0, {}) if snapshot is None
            else (snapshot.count,
                  snapshot_state(snapshot.state, session_id=session_id, seq=None,
                                 scope=f"user {user_id!r}" if user_id else f"app {app_name!r}"))
        )
        expected = base_count
        for entry in entries:
            expected += 1
            if entry.stream_seq != expected:
                raise CorruptEventError(entry.session_id, entry.seq, (
                    f"the {_scope_name(app_name, user_id)} stream holds entry "
                    f"{entry.stream_seq} where entry {expected} belongs: it was changed "
                    "behind the store's back. `evs verify` names the damage."))
            try:
                apply_scope_delta(state, entry.delta)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise CorruptEventError(entry.session_id, entry.seq, (
                    f"its entry {entry.stream_seq} in the {_scope_name(app_name, user_id)} "
                    f"stream cannot be decoded ({exc!r}).")) from exc
        newest_hash = entries[-1].chain_hash if entries else None
        if newest_hash is not None and len(entries) >= (self._snapshot_interval
                                                        if save_after is None else save_after):
            newest, data = entries[-1], orjson.dumps(state)
            key = self._backend.signing_key
            await self._backend.save_shared_snapshot(
                app_name=app_name,
                user_id=user_id,
                snapshot=SharedSnapshot(
                    position=newest.position, count=newest.stream_seq, state=data,
                    chain_hash=newest_hash,
                    mac=None if key is None else sign_shared_snapshot(
                        key, app_name, newest.user_id, position=newest.position,
                        count=newest.stream_seq, chain_hash=newest_hash, state=data),
                ),
            )
        return state

    def _trusted_state(self, session_id: str, cache: HeadState) -> bool:
        """Whether a keyed store may use ``cache`` of the session's own state (unkeyed: the
        backend's binding to the event's chain hash is all there is)."""
        key = self._backend.signing_key
        return key is None or (cache.mac is not None and compare_digest(
            cache.mac, sign_head_state(key, session_id, cache.seq, cache.chain_hash,
                                       cache.state)))

    def _signed_state(self, session_id: str, newest: StoredEvent, data: bytes) -> HeadState:
        """The cache of the session's own state ``data`` folded up to ``newest``."""
        assert newest.chain_hash is not None
        key = self._backend.signing_key
        return HeadState(seq=newest.seq, chain_hash=newest.chain_hash, state=data,
                         mac=None if key is None else sign_head_state(
                             key, session_id, newest.seq, newest.chain_hash, data))

    def _trusted_shared(self, app_name: str, user_id: str | None,
                        snapshot: SharedSnapshot) -> bool:
        """Whether a keyed store may use the scope's ``snapshot``."""
        key = self._backend.signing_key
        return key is None or (
            snapshot.mac is not None and snapshot.chain_hash is not None
            and compare_digest(snapshot.mac, sign_shared_snapshot(
                key, app_name, APP_SCOPE if user_id is None else user_id,
                position=snapshot.position, count=snapshot.count,
                chain_hash=snapshot.chain_hash, state=snapshot.state)))

    async def shared_state(self, app_name: str, user_id: str | None) -> dict[str, Any]:
        """The ``app:`` state of the app (``user_id`` None) or the ``user:`` state of the user,
        at head."""
        return await self._shared_state(app_name, user_id, upto=None, session_id=None)

    async def states_at_head(self, records: Sequence[SessionRecord]) -> list[dict[str, Any]]:
        """The merged state at head of each session, in a fixed number of reads however many
        sessions and scopes: never one read per session or per ``user:``/``app:`` scope.

        Each session's own state starts from its head state (``Backend.load_head_states``:
        one row per session, used only while the event it was folded at still has its chain
        hash, it decodes and, on a keyed store, the row's MAC is the key's), else from its
        newest snapshot; only the events after it are read (all sessions' in one read) and
        folded, and the head states of the sessions that had such events are saved back in
        one write, so the next listing reads one row per session. Every scope's shared state
        is read in one call (``Backend.read_shared_heads``). The result equals ``state()``
        of each session at the version its record names."""
        backend = self._backend
        live = [r.session_id for r in records if r.version > 0]
        heads = await backend.load_head_states(live) if live else {}
        # Each session's state is a new mapping the caller keeps (see _gcpause).
        paused = pause_collector(len(records))
        try:
            bases, unheaded = self._trusted_heads(records, heads)
        finally:
            resume_collector(paused)
        if unheaded:
            for sid, snapshot in (await backend.load_snapshots(unheaded)).items():
                if self._trusted_state(sid, snapshot):
                    bases[sid] = (snapshot.seq, snapshot_state(snapshot.state, session_id=sid,
                                                               seq=snapshot.seq))
        behind: dict[str, int] = {}
        for record in records:
            base_seq = bases[record.session_id][0] if record.session_id in bases else 0
            if record.version > base_seq:
                behind[record.session_id] = base_seq
        tails = await backend.read_many(behind) if behind else {}
        shared: dict[tuple[str, str | None], dict[str, Any]] = {}
        wanted: dict[str, dict[str | None, None]] = {}
        for record in records:
            wanted.setdefault(record.app_name, {None: None})[record.user_id] = None
        for app_name, users in wanted.items():
            found = await backend.read_shared_heads(app_name=app_name, user_ids=list(users))
            for user_id, (scope_snapshot, entries) in found.items():
                # A listing reads every scope of the page each time: a scope read with more
                # than a few entries past its snapshot gets a new one, so the next listing
                # reads few (many users with short streams never reach the interval).
                save_after = min(self._snapshot_interval, _LISTING_SCOPE_SNAPSHOT)
                if scope_snapshot is not None and not self._trusted_shared(
                        app_name, user_id, scope_snapshot):
                    scope_snapshot, save_after = None, 1  # fold the stream, sign a new one
                    entries = await backend.read_scope(app_name=app_name, user_id=user_id,
                                                       after=0, upto_position=None)
                shared[(app_name, user_id)] = await self._fold_scope(
                    app_name, user_id, scope_snapshot, entries, session_id=None,
                    save_after=save_after)
        paused = pause_collector(len(records))
        try:
            out, fresh = self._fold_tails(records, bases, behind, tails, shared)
        finally:
            resume_collector(paused)
        if fresh:
            await backend.save_head_states(fresh)
        return out

    def _trusted_heads(
        self, records: Sequence[SessionRecord], heads: Mapping[str, HeadState]
    ) -> tuple[dict[str, tuple[int, dict[str, Any]]], list[str]]:
        """The decoded head states the listing may start from, and the sessions (with events)
        that have none."""
        bases: dict[str, tuple[int, dict[str, Any]]] = {}
        unheaded: list[str] = []
        for record in records:
            sid = record.session_id
            head = heads.get(sid)
            if head is not None and head.seq <= record.version and self._trusted_state(sid,
                                                                                       head):
                try:
                    bases[sid] = (head.seq, snapshot_state(head.state, session_id=sid,
                                                           seq=head.seq))
                    continue
                except CorruptSnapshotError:
                    pass  # a cache: fold the log instead (evs verify names the row)
            if record.version > 0:
                unheaded.append(sid)
        return bases, unheaded

    def _fold_tails(
        self, records: Sequence[SessionRecord], bases: dict[str, tuple[int, dict[str, Any]]],
        behind: Mapping[str, int], tails: Mapping[str, list[StoredEvent]],
        shared: Mapping[tuple[str, str | None], dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], dict[str, HeadState]]:
        """Each session's merged state (its base, its tail folded, the shared state on top)
        and the head states to save for the sessions whose tail was folded."""
        fresh: dict[str, HeadState] = {}
        out: list[dict[str, Any]] = []
        for record in records:
            sid = record.session_id
            state: dict[str, Any] = bases[sid][1] if sid in bases else {}
            if sid in behind:
                # Only what the record counted: an event appended since the listing is not
                # folded.
                tail = [r for r in in_seq_order(sid, tails.get(sid, []), after=behind[sid])
                        if r.seq <= record.version]
                fold_session_rows(state, tail)
                newest = tail[-1] if tail else None
                if newest is not None and newest.seq == record.version \
                        and newest.chain_hash is not None:
                    fresh[sid] = self._signed_state(sid, newest, orjson.dumps(state))
            state.update(shared[(record.app_name, None)])
            state.update(shared[(record.app_name, record.user_id)])
            out.append(state)
        return out, fresh

    async def _position_of(self, session_id: str, seq: int) -> int:
        rows = await self._backend.read(
            session_id, after=None, upto=seq, backwards=True, limit=1
        )
        return rows[0].position if rows else 0
