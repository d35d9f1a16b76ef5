"""A LangGraph checkpointer on the event store (``pip install 'agent-eventstore[langgraph]'``)::

    graph = builder.compile(checkpointer=EventStoreSaver("sessions.db"))

``EventStoreSaver`` is a ``langgraph.checkpoint.base.BaseCheckpointSaver`` with the async and the
sync methods, plus ``delete_for_runs``, ``copy_thread`` and ``prune``. A thread is one store
session (its id is the ``thread_id``, its app ``app_name``); each checkpoint and each task's
pending writes is one event, appended and never rewritten, in the hash chain ``evs verify``
checks. A checkpoint stores only what changed since its parent, and a list channel (messages)
only the elements it appended, so a thread's bytes grow with its history, not its square. How
events are laid out: ``eventstore.integrations.langgraph.log``; the guide: ``docs/langgraph.md``.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventstore import (
    EventStore,
    SessionNotFoundError,
    StoreUsageError,
)

from .checkpoints import checkpoint_tuple, config_of, thread_of
from .log import (
    MISSING,
    Entry,
    Hot,
    ThreadIndex,
    decode_blob,
    encode_blob,
    extends,
    handed,
)
from .loop import Home
from .preview import preview, task_node
from .threads import USER, Threads

__all__ = ["EventStoreSaver"]

_PAGE: Final = 1000


class EventStoreSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose threads are sessions of an event store.

    ``url_or_store`` is a store URL or path (``memory://`` by default, private to this saver;
    ``sessions.db``; ``postgresql://…``), opened on first use (migrated to the current schema)
    and closed by ``close()``/``aclose()``: for the async methods on the caller's loop, for the
    sync ones on a loop thread the saver owns (``memory://``: one store, on that thread; see
    ``loop``); or an open ``EventStore``, left open, whose loop the saver learns from its first
    async call. Sync methods work from any thread, async ones from any loop. A thread's
    appends are sent one transaction at a time, those that arrive meanwhile together
    (``outbox``); none returns before its commit.

    Guarantees: every checkpoint and every ``put_writes`` call is one appended event (nothing
    stored is changed); a checkpoint loads with the values it was put with (``self.serde``
    encodes every value, metadata and checkpoint body, so an encrypting serializer keeps them
    all encrypted); its pending writes are the ones put for that checkpoint id of that
    namespace, and no other branch's. ``delete_thread`` and ``prune(strategy="delete")``
    delete the thread's session; ``prune(keep_latest)`` and ``delete_for_runs`` append an
    event that hides the checkpoints (the log keeps them, so the kept checkpoints' deltas still
    resolve). A thread is the session of (``app_name``, user ``"langgraph"``) with the
    thread's id: another app's or user's session of the same id is left alone.
    """

    def __init__(
        self,
        url_or_store: str | os.PathLike[str] | EventStore = "memory://",
        *,
        serde: SerializerProtocol | None = None,
        app_name: str = "langgraph",
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(app_name, str) or not app_name:
            raise StoreUsageError(f"app_name must be a non-empty string, not {app_name!r}.")
        self.app_name = app_name
        self._home: Home[Threads] = Home(url_or_store,
                                         make=lambda handle: Threads(handle, app_name))

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        """Open the store now (creating or migrating its schema) rather than on first use,
        so the first checkpoint of a run does not wait for it. Optional, idempotent."""
        self._home.run_sync(Threads.store)

    async def asetup(self) -> None:
        """``setup`` from async code."""
        await self._home.run(Threads.store)

    def close(self) -> None:
        """Close the stores this saver opened, and stop its loop thread. Idempotent; later
        calls raise StoreClosedError."""
        self._home.close()

    async def aclose(self) -> None:
        """``close`` from async code."""
        await self._home.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # -- the async API -------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its thread's newest in its namespace when it names
        no ``checkpoint_id``) with its pending writes, or None."""
        return await self._home.run(lambda t: self._get_tuple(t, config, self.serde))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints of ``config``'s thread (every thread of the app when None), in its
        namespace when it names one, newest first; only those whose metadata has every
        ``filter`` item, whose id is below ``before``'s, at most ``limit``."""
        found = await self._home.run(
            lambda t: self._list(t, config, filter, before, limit, self.serde))
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Append ``checkpoint`` (put on ``config``'s checkpoint, its parent) storing the
        values of ``new_versions`` only; returns the config naming it."""
        return await self._home.run(
            lambda t: self._put(t, config, checkpoint, metadata, new_versions, self.serde))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """Append one task's pending writes for the checkpoint ``config`` names."""
        await self._home.run(
            lambda t: self._put_writes(t, config, writes, task_id, task_path, self.serde))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """For each of ``channels``, the pending writes to it along the parent chain of the
        checkpoint ``config`` names (its own writes excluded), oldest first, and as ``seed``
        the value of the nearest ancestor that holds one (no ``seed`` when none does): what
        LangGraph's ``DeltaChannel`` rebuilds its value from, as LangGraph's generic walk over
        ``get_tuple`` finds it, but from one read of the thread's log, decoding only those
        channels' writes and values."""
        names = builtins.list(channels)
        if not names:
            return {}
        return await self._home.run(lambda t: self._delta_history(t, config, names, self.serde))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's session (all its checkpoints and writes); no thread: no-op."""
        await self._home.run(lambda t: self._delete_thread(t, str(thread_id)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Hide every checkpoint (with its writes) whose metadata ``run_id`` is in
        ``run_ids``, in every thread of the app (an appended drop event per thread)."""
        await self._home.run(lambda t: self._delete_for_runs(t, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Make ``target_thread_id`` a copy of the source thread: a fork of its session, every
        event (checkpoints, writes, drops) with the same ids, linked to its origin. A source
        with no session copies nothing; an existing target raises SessionExistsError."""
        source, target = str(source_thread_id), str(target_thread_id)
        await self._home.run(lambda t: self._copy_thread(t, source, target))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: hide all but the newest checkpoint of each namespace;
        ``"delete"``: delete the threads. Raises StoreUsageError for another strategy."""
        if strategy not in ("keep_latest", "delete"):
            raise StoreUsageError(
                f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}."
            )
        ids = [str(i) for i in thread_ids]
        await self._home.run(lambda t: self._prune(t, ids, strategy))

    # -- the sync API (the same operations, run on the store's loop) ------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """See ``aget_tuple``."""
        return self._home.run_sync(lambda t: self._get_tuple(t, config, self.serde))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """See ``alist``."""
        return iter(self._home.run_sync(
            lambda t: self._list(t, config, filter, before, limit, self.serde)))

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """See ``aput``."""
        return self._home.run_sync(
            lambda t: self._put(t, config, checkpoint, metadata, new_versions, self.serde))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """See ``aput_writes``."""
        self._home.run_sync(
            lambda t: self._put_writes(t, config, writes, task_id, task_path, self.serde))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """See ``aget_delta_channel_history``."""
        names = builtins.list(channels)
        if not names:
            return {}
        return self._home.run_sync(lambda t: self._delta_history(t, config, names, self.serde))

    def delete_thread(self, thread_id: str) -> None:
        """See ``adelete_thread``."""
        self._home.run_sync(lambda t: self._delete_thread(t, str(thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """See ``adelete_for_runs``."""
        self._home.run_sync(lambda t: self._delete_for_runs(t, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """See ``acopy_thread``."""
        source, target = str(source_thread_id), str(target_thread_id)
        self._home.run_sync(lambda t: self._copy_thread(t, source, target))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """See ``aprune``."""
        if strategy not in ("keep_latest", "delete"):
            raise StoreUsageError(
                f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}."
            )
        ids = [str(i) for i in thread_ids]
        self._home.run_sync(lambda t: self._prune(t, ids, strategy))

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """The version after ``current``: a zero-padded counter and a random fraction, so
        versions increase and two branches never make the same one (as ``InMemorySaver``)."""
        if current is None:
            number = 0
        elif isinstance(current, int | float):
            number = int(current)
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- operations (on the store's loop) -----------------------------------------------------

    async def _get_tuple(self, t: Threads, config: RunnableConfig,
                         serde: SerializerProtocol) -> CheckpointTuple | None:
        thread_id, ns = thread_of(config)
        index = await t.refreshed(thread_id)
        entry = index.entry(ns, get_checkpoint_id(config))
        if entry is None:
            return None
        found = checkpoint_tuple(thread_id, index, entry, serde, None, hot=True)
        _learn_delta_channels(index, found.metadata)  # a resumed run's first writes, too
        return found

    async def _delta_history(self, t: Threads, config: RunnableConfig,
                             channels: builtins.list[str],
                             serde: SerializerProtocol) -> dict[str, Any]:
        # The walk get_tuple + parent_config makes (each ancestor visited once; a dropped or
        # missing one ends it), on the index: one refresh of the thread, and only the wanted
        # channels decoded, instead of a read and a whole checkpoint per ancestor.
        thread_id, ns = thread_of(config)
        index = await t.refreshed(thread_id)
        loads = serde.loads_typed
        found: dict[str, builtins.list[PendingWrite]] = {c: [] for c in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        memo: dict[tuple[str, tuple[str, str]], Any] = {}
        target = index.entry(ns, get_checkpoint_id(config))
        cursor = None if target is None or target.parent is None else index.entry(
            ns, target.parent)
        while cursor is not None and remaining:
            for task, channel, blob, _ in reversed(index.pending(ns, cursor.id)):
                if channel in remaining:
                    found[channel].append((task, channel, loads(decode_blob(blob))))
            for channel in [c for c in channels if c in remaining]:
                value = index.resolve(cursor, channel, loads, memo)
                if value is MISSING:
                    continue
                # A list is built of the saver's own elements: the caller gets copies.
                seeds[channel] = handed(tuple(value)) if type(value) is list else value
                remaining.discard(channel)
            cursor = None if cursor.parent is None else index.entry(ns, cursor.parent)
        history: dict[str, Any] = {}
        for channel in channels:
            entry: dict[str, Any] = {"writes": found[channel][::-1]}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            history[channel] = entry
        return history

    async def _thread_ids(self, t: Threads) -> builtins.list[str]:
        store = await t.store()
        ids: builtins.list[str] = []
        cursor: str | None = None
        while True:
            page = await store.list_sessions(app_name=self.app_name, after=cursor, limit=_PAGE)
            ids.extend(s.id for s in page.sessions)
            if page.next_cursor is None:
                return ids
            cursor = page.next_cursor

    async def _list(self, t: Threads, config: RunnableConfig | None, filter: dict[str, Any] | None,
                    before: RunnableConfig | None, limit: int | None,
                    serde: SerializerProtocol) -> builtins.list[CheckpointTuple]:
        if config is None:
            thread_ids, ns, cid = await self._thread_ids(t, ), None, None
        else:
            thread_id, _ = thread_of(config)
            configurable = config["configurable"]
            raw_ns = configurable.get("checkpoint_ns")
            thread_ids, ns = [thread_id], (None if raw_ns is None else str(raw_ns))
            cid = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        out: builtins.list[CheckpointTuple] = []
        for thread_id in thread_ids:
            index = await t.refreshed(thread_id)
            memo: dict[tuple[str, tuple[str, str]], Any] = {}
            for entry in index.visible(ns):
                if limit is not None and len(out) >= limit:
                    return out
                if (cid and entry.id != cid) or (before_id and entry.id >= before_id):
                    continue
                if filter:
                    metadata = serde.loads_typed(decode_blob(entry.md))
                    if not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                out.append(checkpoint_tuple(thread_id, index, entry, serde, memo, hot=False))
        return out

    async def _put(self, t: Threads, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions,
                   serde: SerializerProtocol) -> RunnableConfig:
        thread_id, ns = thread_of(config)
        parent = config["configurable"].get("checkpoint_id")
        index = await t.loaded(thread_id)
        dumps = serde.dumps_typed
        body: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values")
        versions = dict(body.pop("channel_versions"))
        cid = str(checkpoint["id"])
        blobs: builtins.list[builtins.list[Any]] = []
        loads = serde.loads_typed
        keep: dict[str, Hot] = {}
        parent_hot = index.hot.get((ns, parent), {}) if parent is not None else {}
        for channel, version in new_versions.items():
            if channel not in values:
                blobs.append([channel, version, "e"])
                continue
            value = values[channel]
            if type(value) is list:
                # The saver keeps its own elements, decoded from what it stores (never the
                # caller's objects, which the caller may edit after the put).
                base = parent_hot.get(channel)
                if base is not None and base.version != version and extends(base.given, value):
                    typed = dumps(value[len(base.given):])
                    blobs.append([channel, version, "x", base.version, *encode_blob(typed)])
                else:
                    typed = dumps(value)
                    blobs.append([channel, version, "v", *encode_blob(typed)])
                    base = None
                keep[channel] = Hot.stored(version=version, given=tuple(value), base=base,
                                           typed=typed, loads=loads)
            else:
                blobs.append([channel, version, "v", *encode_blob(dumps(value))])
        for channel, hot in parent_hot.items():
            if channel not in new_versions and versions.get(channel) == hot.version:
                keep[channel] = hot  # unchanged: the next delta's base too
        md = get_checkpoint_metadata(config, metadata)
        _learn_delta_channels(index, md)
        run_id = md.get("run_id")
        meaning: dict[str, Any] = {
            "t": "checkpoint", "ns": ns, "id": cid, "parent": parent, "cv": versions,
            "cp": encode_blob(dumps(body)), "md": encode_blob(dumps(md)), "blobs": blobs,
        }
        if isinstance(run_id, str):
            meaning["run_id"] = run_id
        step = md.get("step")
        where = f" in {ns}" if ns else ""
        text = (f"checkpoint {cid}{where}: step {step} ({md.get('source')}); changed "
                f"{', '.join(sorted(str(c) for c in new_versions)) or 'nothing'}")

        def whole() -> dict[str, Any]:
            # For a session made anew: the appends' bases are not in it, store whole values.
            return {**meaning, "blobs": [
                [b[0], b[1], "v", *encode_blob(dumps(values[b[0]]))] if b[2] == "x" else b
                for b in blobs]}

        await t.append(thread_id, meaning, text,
                           run_id if isinstance(run_id, str) else None, whole=whole)
        if t.cached(thread_id) is index:
            for channel, hot in keep.items():
                index.keep_hot(ns, cid, channel, hot)
        return config_of(thread_id, ns, cid)

    async def _put_writes(self, t: Threads, config: RunnableConfig,
                          writes: Sequence[tuple[str, Any]], task_id: str, task_path: str,
                          serde: SerializerProtocol) -> None:
        thread_id, ns = thread_of(config)
        cid = config["configurable"].get("checkpoint_id")
        if not cid:
            raise StoreUsageError(
                f"put_writes needs the config of a checkpoint (configurable.checkpoint_id); "
                f"got {config['configurable']!r}."
            )
        index = await t.loaded(thread_id)
        stored = index.writes.get((ns, str(cid)), {})
        rows: builtins.list[builtins.list[Any]] = []
        shown: builtins.list[str] = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            if idx >= 0 and (task_id, idx) in stored:
                continue  # kept as first written (LangGraph's savers do the same)
            typed = serde.dumps_typed(value)
            rows.append([idx, channel, *encode_blob(typed)])
            shown.append(f"{channel}={preview(typed, value)}")
        if not rows:
            return
        meaning = {"t": "writes", "ns": ns, "cp": str(cid), "task": str(task_id),
                   "path": str(task_path), "w": rows}
        where = f" in {ns}" if ns else ""
        text = (f"writes of {task_node(task_path)}task {task_id} on checkpoint {cid}{where}: "
                + "; ".join(shown))
        # LangGraph puts the next checkpoint only once writes to a delta channel committed:
        # such writes waiting for it would wait out WRITES_WAIT every step.
        delta = index.delta
        waits = not delta or not any(channel in delta for channel, _ in writes)
        await t.append(thread_id, meaning, text, None, waits=waits)

    async def _owned(self, t: Threads, thread_id: str) -> bool:
        """Whether the thread's session exists."""
        return (await t.refreshed(thread_id)).exists

    async def _delete_thread(self, t: Threads, thread_id: str) -> None:
        if await self._owned(t, thread_id):
            with contextlib.suppress(SessionNotFoundError):
                await (await t.store()).delete_session(
                    thread_id, app_name=self.app_name, user_id=USER)
        t.forget(thread_id)

    async def _drop(self, t: Threads, thread_id: str, entries: builtins.list[Entry],
                    why: str) -> None:
        if entries:
            meaning = {"t": "drop", "cps": [[e.ns, e.id] for e in entries]}
            text = f"dropped {len(entries)} checkpoint(s) ({why}): " + ", ".join(
                e.id for e in entries)
            await t.append(thread_id, meaning, text, None)

    async def _delete_for_runs(self, t: Threads, run_ids: Sequence[str]) -> None:
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        for thread_id in await self._thread_ids(t, ):
            index = await t.refreshed(thread_id)
            hit = [e for e in index.visible(None) if e.run_id in wanted]
            await self._drop(t, thread_id, hit, "delete_for_runs")

    async def _copy_thread(self, t: Threads, source: str, target: str) -> None:
        if not await self._owned(t, source):
            return
        store = await t.store()
        head = await store.version(source, app_name=self.app_name, user_id=USER)
        await store.fork(source, at=head, new_session_id=target,
                         app_name=self.app_name, user_id=USER)
        t.forget(target)

    async def _prune(self, t: Threads, thread_ids: builtins.list[str], strategy: str) -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                await self._delete_thread(t, thread_id)
                continue
            index = await t.refreshed(thread_id)
            stale: builtins.list[Entry] = []
            for ns in index.entries:
                newest = index.entry(ns, None)
                stale.extend(e for e in index.visible(ns) if e is not newest)
            await self._drop(t, thread_id, stale, "prune keep_latest")


def _learn_delta_channels(index: ThreadIndex, metadata: Mapping[str, Any]) -> None:
    """Note the channels a checkpoint's metadata names as LangGraph ``DeltaChannel``s
    (``counters_since_delta_snapshot``; absent right after a snapshot) in ``index.delta``."""
    counters = metadata.get("counters_since_delta_snapshot")
    if isinstance(counters, dict) and counters:
        index.delta.update(str(c) for c in counters)
