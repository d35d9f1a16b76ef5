"""LangGraph's checkpoints as reads return them: the thread and namespace a config addresses,
the config of a stored checkpoint, and the ``CheckpointTuple`` built from a thread's index
(``log``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventstore import StoreUsageError

from .log import MISSING, Entry, Hot, ThreadIndex, decode_blob, handed

__all__ = ["checkpoint_tuple", "config_of", "thread_of"]


def thread_of(config: RunnableConfig) -> tuple[str, str]:
    """The ``(thread_id, checkpoint_ns)`` a config addresses; ``StoreUsageError`` without a
    thread id."""
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise StoreUsageError(
            f"A LangGraph config needs configurable.thread_id; got {configurable!r}."
        )
    return str(thread_id), str(configurable.get("checkpoint_ns") or "")


def config_of(thread_id: str, ns: str, cid: str) -> RunnableConfig:
    """The config that addresses checkpoint ``cid`` of namespace ``ns`` of the thread."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def checkpoint_tuple(thread_id: str, index: ThreadIndex, entry: Entry,
                     serde: SerializerProtocol,
                     memo: dict[tuple[str, tuple[str, str]], Any] | None,
                     *, hot: bool) -> CheckpointTuple:
    """The ``CheckpointTuple`` of ``entry`` (a checkpoint of ``index``): its values resolved
    through ``memo`` (shared by the checkpoints of one ``list``), its pending writes. Every
    value is the caller's own: decoded for this read, or (list values) copies of the saver's
    elements. With ``hot`` the list values are kept in the index, as handed out and as
    stored, for the next checkpoint's delta."""
    loads = serde.loads_typed
    checkpoint = loads(decode_blob(entry.cp))
    checkpoint["channel_versions"] = dict(entry.cv)
    values: dict[str, Any] = {}
    for channel, version in entry.cv.items():
        value = index.resolve(entry, channel, loads, memo)
        if value is MISSING:
            continue
        if type(value) is list:  # the saver's own objects: the caller gets copies
            own = tuple(value)
            value = handed(own)
            if hot:
                index.keep_hot(entry.ns, entry.id, channel,
                               Hot(version=version, given=tuple(value), own=own))
        values[channel] = value
    checkpoint["channel_values"] = values
    return CheckpointTuple(
        config=config_of(thread_id, entry.ns, entry.id),
        checkpoint=checkpoint,
        metadata=loads(decode_blob(entry.md)),
        parent_config=(None if entry.parent is None
                       else config_of(thread_id, entry.ns, entry.parent)),
        pending_writes=[(task, channel, loads(decode_blob(blob)))
                        for task, channel, blob, _ in index.pending(entry.ns, entry.id)],
    )
