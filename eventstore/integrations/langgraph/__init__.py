"""A LangGraph checkpointer on the event store (``pip install 'agent-eventstore[langgraph]'``)::

    graph = builder.compile(checkpointer=EventStoreSaver("sessions.db"))

The rooms, named after LangGraph's own concepts: ``saver`` (``EventStoreSaver``, the
``BaseCheckpointSaver``), ``checkpoints`` (the ``CheckpointTuple`` a read returns and the
configs that address it), ``log`` (how checkpoints and pending writes are stored as events, and
the fold of a thread that reads are served from), ``preview`` (the readable text of each event),
``loop`` (which loop each call runs on: the caller's for the async methods, the saver's own
loop thread for the sync ones), ``threads`` (what the saver keeps on one loop: its store and
thread indexes) and ``outbox`` (a thread's appends, one transaction at a time). The store's
home loop, shared with the other frameworks' doors, is ``eventstore.integrations._handle``.
"""

from __future__ import annotations

try:
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.integrations.langgraph needs langgraph: install agent-eventstore[langgraph]"
    ) from exc

from .log import METADATA_KEY, CorruptThreadError
from .saver import EventStoreSaver

__all__ = ["METADATA_KEY", "CorruptThreadError", "EventStoreSaver"]
