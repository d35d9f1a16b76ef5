"""The OpenAI Agents SDK's ``Session`` protocol on the event store (``pip install
'agent-eventstore[openai-agents]'``)::

    result = await Runner.run(agent, "Hi", session=EventStoreSession("chat-1", "sessions.db"))

The rooms, named after the SDK's own concepts: ``session`` (``EventStoreSession``, the SDK's
``Session`` and ``OpenAIResponsesCompactionAwareSession`` protocols), ``items`` (an item's
stored form, its native mirror and the cache of the items at head) and ``compaction``
(compaction without deleting anything: the request, the compactors, the summary). The store's
home loop, shared with the other frameworks' doors, is ``eventstore.integrations._handle``.
"""

from __future__ import annotations

try:
    import agents.memory.session_settings  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.integrations.openai_agents needs openai-agents: install "
        "agent-eventstore[openai-agents]"
    ) from exc

from .compaction import CompactionRequest, Compactor, ResponsesCompactor
from .items import CACHE_NAME, METADATA_KEY, SessionItemError, mirrored_call_id
from .session import EventStoreSession

__all__ = [
    "CACHE_NAME",
    "METADATA_KEY",
    "CompactionRequest",
    "Compactor",
    "EventStoreSession",
    "ResponsesCompactor",
    "SessionItemError",
    "mirrored_call_id",
]
