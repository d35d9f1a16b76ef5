"""LangGraph threads as store sessions: how checkpoints and pending writes are stored as events
(pure functions), and ``ThreadIndex``, the fold of one thread's events that reads are served from.

One store session per thread (its id is the ``thread_id``); every checkpoint namespace of the
thread (subgraphs) lives in that session, named in each event. An event means what its
``custom_metadata["langgraph"]`` (``METADATA_KEY``) says:

- ``{"t": "checkpoint", "ns", "id", "parent", "cv", "cp", "md", "blobs", ...}``: a checkpoint.
  ``cv`` is its ``channel_versions``; ``cp`` the rest of the checkpoint without its values and
  ``md`` its metadata, both as ``[type, base64]`` from the saver's serializer. ``blobs`` holds
  only the channels of ``new_versions`` (what changed since the parent): ``[channel, version,
  "v", type, b64]`` a whole value, ``[channel, version, "e"]`` a channel left empty, ``[channel,
  version, "x", base_version, type, b64]`` a list channel stored as the elements appended to its
  ``base_version`` value (the common case of a messages list): so a thread's bytes grow with
  what each step adds, not with the whole history at every step.
- ``{"t": "writes", "ns", "cp", "task", "path", "w": [[idx, channel, type, b64], ...]}``: pending
  writes of one task, for the checkpoint ``cp`` of namespace ``ns``, never for any other: a
  fork (a new checkpoint on an old one) starts with no pending writes of its own, whatever other
  branches wrote. A regular write ``(task, idx)`` already stored is kept (the first wins);
  special writes (negative ``idx``: error, interrupt, resume) replace the stored one, as
  LangGraph's savers do.
- ``{"t": "drop", "cps": [[ns, id], ...]}``: those checkpoints (and their writes) are no longer
  listed or loaded (``prune(keep_latest)`` and ``delete_for_runs``); their values still serve
  the deltas of the checkpoints kept.

A value is found by its ``(namespace, channel, version)``; when several checkpoints stored the
same version (integer versions on two branches) the one on the target's parent chain wins, else
the newest. A delta's base is resolved the same way from the checkpoint's parent.
"""

from __future__ import annotations

import base64
import copy
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from eventstore._gcpause import pause as pause_collector
from eventstore._gcpause import resume as resume_collector

__all__ = [
    "METADATA_KEY",
    "CorruptThreadError",
    "Entry",
    "Hot",
    "ThreadIndex",
    "decode_blob",
    "encode_blob",
    "extends",
    "handed",
]

METADATA_KEY: Final = "langgraph"
"""Key in ``Event.custom_metadata`` of what an event means to the thread (see the module)."""

Typed = tuple[str, bytes]
_MISSING: Final = object()
_HOT_PER_THREAD: Final = 8
_LAZY_PARTS: Final = 32


class CorruptThreadError(Exception):
    """A stored delta whose base value is not in the thread's log (the log was changed behind
    the saver's back)."""


def encode_blob(typed: Typed) -> list[str]:
    """``[type, base64]`` of a serializer's ``(type, bytes)``."""
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def decode_blob(stored: list[Any]) -> Typed:
    """The ``(type, bytes)`` ``encode_blob`` stored."""
    return str(stored[0]), base64.b64decode(stored[1])


def extends(base: tuple[Any, ...], value: list[Any]) -> bool:
    """Whether ``value`` starts with exactly the objects of ``base`` (identity, not equality:
    ``1 == True``, so equal is not the same stored value)."""
    n = len(base)
    return n <= len(value) and all(map(operator.is_, base, value[:n]))


@dataclass(slots=True, kw_only=True, eq=False)
class Entry:
    """One stored checkpoint, as its event says (values still encoded)."""

    ns: str
    """Its checkpoint namespace (``""`` for the root graph)."""
    id: str
    """Its checkpoint id."""
    parent: str | None
    """The id of the checkpoint it was put on (same namespace), if any."""
    seq: int
    """Seq of its event in the thread's session."""
    cv: dict[str, Any]
    """Its channel versions."""
    cp: list[Any]
    """The checkpoint without values, ``[type, base64]``."""
    md: list[Any]
    """Its metadata, ``[type, base64]``."""
    run_id: str | None
    """``metadata["run_id"]`` when it is a string."""
    blobs: dict[str, list[Any]]
    """channel -> ``[version, kind, ...]`` for the channels it stored (see the module)."""
    dropped: bool = False
    """Hidden by a later drop event."""


class Hot:
    """The list value of a channel at one checkpoint, kept in memory for the next checkpoint's
    delta and for reads to start from.

    A put keeps the elements it stored as serialized bytes and decodes them only when a read
    or a delta needs ``own``: most checkpoints of a short thread are never read back in the
    process that wrote them."""

    __slots__ = ("_loads", "_own", "_parts", "_prefix", "given", "version")

    version: Any
    """The channel's version at that checkpoint."""
    given: tuple[Any, ...]
    """The elements as the caller holds them (put, or handed out by a read): a later put whose
    list starts with exactly these objects stores only what follows them."""

    def __init__(self, *, version: Any, given: tuple[Any, ...], own: tuple[Any, ...]) -> None:
        self.version, self.given = version, given
        self._own: tuple[Any, ...] | None = own
        self._prefix: tuple[Any, ...] = ()
        self._parts: tuple[Typed, ...] = ()
        self._loads: Any = None

    @classmethod
    def stored(cls, *, version: Any, given: tuple[Any, ...], base: Hot | None, typed: Typed,
               loads: Any) -> Hot:
        """The value a put stored as ``typed`` (the whole list when ``base`` is None, else the
        elements appended to ``base``'s), decoded with ``loads`` on first use of ``own``."""
        hot = cls(version=version, given=given, own=())
        hot._own, hot._loads = None, loads
        if base is None:
            hot._parts = (typed,)
        elif base._own is not None:
            hot._prefix, hot._parts = base._own, (typed,)
        else:
            hot._prefix, hot._parts = base._prefix, (*base._parts, typed)
        if len(hot._parts) > _LAZY_PARTS:
            hot.own  # noqa: B018 - decoded now: the bytes kept stay bounded
        return hot

    @property
    def own(self) -> tuple[Any, ...]:
        """The elements as stored, objects no caller ever gets (reads hand out copies), so
        nothing a caller does to what it holds changes what the saver reads."""
        if self._own is None:
            elements = list(self._prefix)
            for typed in self._parts:
                elements.extend(self._loads(typed))
            self._own, self._prefix, self._parts, self._loads = tuple(elements), (), (), None
        return self._own


@dataclass(slots=True)
class ThreadIndex:
    """The fold of one thread's events: checkpoints by namespace and id, pending writes by
    checkpoint, where each channel version is stored, and resolved list values of recently
    used checkpoints (``hot``; derived, dropped at will)."""

    seq: int = 0
    """Seq of the newest event folded (0: none)."""
    last_id: str = ""
    """Id of the event at ``seq``."""
    exists: bool = False
    """Whether the thread's session exists."""
    entries: dict[str, dict[str, Entry]] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], tuple[str, str, list[Any], str]]] = (
        field(default_factory=dict)
    )
    holders: dict[tuple[str, str, Any], list[Entry]] = field(default_factory=dict)
    hot: OrderedDict[tuple[str, str], dict[str, Hot]] = field(default_factory=OrderedDict)
    newest: dict[str, str] = field(default_factory=dict)
    """Namespace -> id of its newest visible checkpoint, when known (the ids increase)."""
    delta: set[str] = field(default_factory=set)
    """Channels named as LangGraph ``DeltaChannel``s by the metadata
    (``counters_since_delta_snapshot``) of checkpoints this saver put or loaded: LangGraph
    puts the next checkpoint only after writes to them committed, so those writes never wait
    for it (``outbox``). A hint for the outbox only, never part of a read's answer: derived
    from checkpoints as they pass through this saver, so it is empty again for an index folded
    anew until the next put or load."""

    # -- folding events --------------------------------------------------------------------

    def apply(self, event: Mapping[str, Any]) -> None:
        """Fold one event (a compact mapping of ``read_mappings``) newer than ``seq``."""
        self.seq = event["seq"]
        self.last_id = event["id"]
        self.exists = True
        meaning = event.get("m", {}).get(METADATA_KEY)
        if not isinstance(meaning, dict):
            return
        kind = meaning.get("t")
        if kind == "checkpoint":
            self._checkpoint(meaning, event["seq"])
        elif kind == "writes":
            self.add_writes(meaning["ns"], meaning["cp"], meaning["task"], meaning["path"],
                            meaning["w"])
        elif kind == "drop":
            for ns, cid in meaning["cps"]:
                entry = self.entries.get(ns, {}).get(cid)
                if entry is not None:
                    entry.dropped = True
                    if self.newest.get(ns) == cid:
                        del self.newest[ns]

    def _checkpoint(self, meaning: dict[str, Any], seq: int) -> None:
        ns, cid = meaning["ns"], meaning["id"]
        blobs = {b[0]: b[1:] for b in meaning["blobs"]}
        entry = Entry(ns=ns, id=cid, parent=meaning.get("parent"), seq=seq, cv=meaning["cv"],
                      cp=meaning["cp"], md=meaning["md"], run_id=meaning.get("run_id"),
                      blobs=blobs)
        by_id = self.entries.setdefault(ns, {})
        old = by_id.get(cid)
        if old is not None:  # the same checkpoint put again: the newer event wins
            for channel, stored in old.blobs.items():
                self.holders[(ns, channel, _key(stored[0]))].remove(old)
            self.hot.pop((ns, cid), None)
        by_id[cid] = entry
        newest = self.newest.get(ns)
        if newest is not None and newest < cid:
            self.newest[ns] = cid
        for channel, stored in blobs.items():
            self.holders.setdefault((ns, channel, _key(stored[0])), []).append(entry)

    def add_writes(self, ns: str, cid: str, task: str, path: str,
                   writes: Iterable[list[Any]]) -> None:
        """Fold one task's pending writes for checkpoint ``cid`` (see the module's rules)."""
        stored = self.writes.setdefault((ns, cid), {})
        for idx, channel, *blob in writes:
            key = (task, idx)
            if idx >= 0 and key in stored:
                continue
            stored[key] = (task, channel, blob, path)

    # -- reads -----------------------------------------------------------------------------

    def entry(self, ns: str, cid: str | None) -> Entry | None:
        """The visible checkpoint ``cid`` of ``ns``, or its newest when ``cid`` is None."""
        by_id = self.entries.get(ns)
        if not by_id:
            return None
        if cid is not None:
            found = by_id.get(cid)
            return None if found is None or found.dropped else found
        newest = self.newest.get(ns)
        if newest is None:  # not known since a drop (or never): find it once
            visible = [cid for cid, e in by_id.items() if not e.dropped]
            if not visible:
                return None
            newest = self.newest[ns] = max(visible)
        return by_id[newest]

    def visible(self, ns: str | None) -> list[Entry]:
        """The visible checkpoints of ``ns`` (every namespace when None), newest id first
        within each namespace."""
        spaces = self.entries if ns is None else {ns: self.entries.get(ns, {})}
        out: list[Entry] = []
        for by_id in spaces.values():
            out.extend(sorted((e for e in by_id.values() if not e.dropped),
                              key=lambda e: e.id, reverse=True))
        return out

    def pending(self, ns: str, cid: str) -> list[tuple[str, str, list[Any], str]]:
        """``(task, channel, blob, path)`` of the checkpoint's pending writes, in LangGraph's
        ``writes_sort_key`` order ``(path, task, idx)``."""
        stored = self.writes.get((ns, cid), {})
        return [stored[k] for k in sorted(stored, key=lambda k: (stored[k][3], k[0], k[1]))]

    def _holder(self, entry: Entry | None, ns: str, channel: str, version: Any) -> Entry | None:
        """The checkpoint that stored ``channel`` at ``version``: on ``entry``'s parent chain
        (``entry`` itself first) when several did, else the newest."""
        found = self.holders.get((ns, channel, _key(version)))
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        by_id = self.entries.get(ns, {})
        cursor = entry
        while cursor is not None:
            if any(c is cursor for c in found):
                return cursor
            cursor = by_id.get(cursor.parent) if cursor.parent is not None else None
        return max(found, key=lambda e: e.seq)

    def parent_of(self, entry: Entry) -> Entry | None:
        """The checkpoint ``entry`` was put on, if stored (dropped or not)."""
        if entry.parent is None:
            return None
        return self.entries.get(entry.ns, {}).get(entry.parent)

    def resolve(self, entry: Entry, channel: str, loads: Any,
                memo: dict[tuple[str, tuple[str, str]], Any] | None = None) -> Any:
        """The value of ``channel`` at ``entry`` (``_MISSING`` when it has none): a list
        channel's deltas are folded from the nearest resolved ancestor (``hot`` or ``memo``)
        or whole stored value. ``loads`` is the serializer's ``loads_typed``. A list comes
        back as a new list whose elements are the saver's own (``Hot.own``, ``memo``): hand out
        copies (``handed``), never these."""
        version = entry.cv.get(channel, _MISSING)
        if version is _MISSING:
            return _MISSING
        steps: list[tuple[Entry, Any, list[Any]]] = []
        cursor: Entry | None = entry
        base: Any = _MISSING
        while True:
            holder = self._holder(cursor, entry.ns, channel, version)
            if holder is None:
                if steps:
                    raise CorruptThreadError(
                        f"Checkpoint {steps[-1][0].id!r} of namespace {entry.ns!r} stores "
                        f"{channel!r} as an append to version {version!r}, which the thread's "
                        "log does not hold."
                    )
                return _MISSING
            known = self._known(holder, channel, version, memo)
            if known is not None:
                base = known
                break
            stored = holder.blobs[channel]
            kind = stored[1]
            if kind == "e":
                if steps:
                    raise CorruptThreadError(
                        f"Checkpoint {steps[-1][0].id!r} stores {channel!r} as an append to "
                        "an empty channel."
                    )
                return _MISSING
            if kind == "v":
                base = loads(decode_blob(stored[2:4]))
                if type(base) is not list:
                    if steps:
                        raise CorruptThreadError(
                            f"Checkpoint {steps[-1][0].id!r} stores {channel!r} as an append "
                            "to a value that is not a list."
                        )
                    return base
                base = tuple(base)
                self._remember(holder, channel, version, base, memo)
                break
            # "x": the elements appended to the base version, found from the holder's parent.
            steps.append((holder, version, loads(decode_blob(stored[3:5]))))
            version = stored[2]
            cursor = self.parent_of(holder)
        value: tuple[Any, ...] = base
        for holder, step_version, suffix in reversed(steps):
            value = value + tuple(suffix)
            self._remember(holder, channel, step_version, value, memo)
        return list(value)

    def _known(self, holder: Entry, channel: str, version: Any,
               memo: dict[tuple[str, tuple[str, str]], Any] | None) -> tuple[Any, ...] | None:
        key = (holder.ns, holder.id)
        if memo is not None and (channel, key) in memo:
            return memo[(channel, key)]  # type: ignore[no-any-return]
        hot = self.hot.get(key)
        if hot is not None and channel in hot and hot[channel].version == version:
            return hot[channel].own
        return None

    def _remember(self, holder: Entry, channel: str, version: Any, value: tuple[Any, ...],
                  memo: dict[tuple[str, tuple[str, str]], Any] | None) -> None:
        if memo is not None:
            memo[(channel, (holder.ns, holder.id))] = value

    def keep_hot(self, ns: str, cid: str, channel: str, hot: Hot) -> None:
        """Remember the list value of ``channel`` at checkpoint ``cid`` (what the next
        checkpoint's delta is computed against, and loads start from)."""
        key = (ns, cid)
        slot = self.hot.get(key)
        if slot is None:
            slot = self.hot[key] = {}
            while len(self.hot) > _HOT_PER_THREAD:
                self.hot.popitem(last=False)
        else:
            self.hot.move_to_end(key)
        slot[channel] = hot


_IMMUTABLE: Final = frozenset({str, int, float, bool, type(None), bytes})
_DEEP: Final = 24
"""Below this depth of nested containers a value is copied by ``copy.deepcopy`` (which keeps
shared and cyclic references)."""


def handed(own: tuple[Any, ...]) -> list[Any]:
    """A list of ``own``'s elements for a caller, each one ``fresh``: whatever the caller does
    to it (LangGraph's own tests edit a message they read, then put it back) leaves the
    saver's objects as stored."""
    # Copying allocates many small objects the caller keeps (see eventstore._gcpause).
    paused = pause_collector(len(own))
    try:
        return [e if type(e) in _IMMUTABLE else fresh(e, 0) for e in own]
    finally:
        resume_collector(paused)


def fresh(value: Any, depth: int) -> Any:
    """A copy of ``value`` that shares nothing mutable with it, like ``copy.deepcopy`` but about
    four times faster on LangGraph's values (lists and dicts of langchain messages, which are
    pydantic models): lists, dicts, tuples and pydantic models are rebuilt here, with their
    immutable leaves shared; anything else, and whatever lies deeper than ``_DEEP``, goes to
    ``copy.deepcopy``. References shared between elements are not kept shared (nor are they by
    a fresh saver's decoding)."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if depth > _DEEP:
        return copy.deepcopy(value)
    depth += 1
    if kind is list:
        return [v if type(v) in _IMMUTABLE else fresh(v, depth) for v in value]
    if kind is dict:
        return {k: v if type(v) in _IMMUTABLE else fresh(v, depth) for k, v in value.items()}
    if kind is tuple:
        return tuple(v if type(v) in _IMMUTABLE else fresh(v, depth) for v in value)
    if isinstance(value, BaseModel):
        # A shallow copy has its own field, extra and private dicts; copy what they hold.
        new = copy.copy(value)
        for held in (new.__dict__, new.__pydantic_extra__, new.__pydantic_private__):
            if held:
                for k, v in held.items():
                    if type(v) not in _IMMUTABLE:
                        held[k] = fresh(v, depth)
        return new
    return copy.deepcopy(value)


def _key(version: Any) -> Any:
    # 1 and 1.0 and True hash alike; a version's type is part of it.
    return (type(version).__name__, version)


MISSING: Final = _MISSING
"""What ``ThreadIndex.resolve`` returns for a channel without a value."""
