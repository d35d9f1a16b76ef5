"""The OpenAI Agents SDK's ``Session`` protocol on the event store (``pip install
'agent-eventstore[openai-agents]'``)::

    result = await Runner.run(agent, "Hi", session=EventStoreSession("chat-1", "sessions.db"))

The rooms, named after the SDK's own concepts: ``session`` (``EventStoreSession``, the SDK's
``Session`` and ``OpenAIResponsesCompactionAwareSession`` protocols), ``items`` (an item's
stored form, its native mirror and the cache of the items at head) and ``compaction``
(compaction without deleting anything: the request, the compactors, the summary), ``runner``
(``EventStoreRunner``: ``Runner.run`` made durable on the session's log), ``durable`` (one
durable run's writes), ``records`` (what a durable run's events mean) and ``agent_tools``
(an agent tool's nested run, durable in a child session linked to the call). The store's
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
from .durable import CallInDoubtError, ConcurrentRunError
from .items import CACHE_NAME, METADATA_KEY, SessionItemError, mirrored_call_id
from .records import RUN_KEY
from .runner import DurableModel, EventStoreRunner, RecordedToolError
from .session import EventStoreSession

__all__ = [
    "CACHE_NAME",
    "METADATA_KEY",
    "RUN_KEY",
    "CallInDoubtError",
    "CompactionRequest",
    "Compactor",
    "ConcurrentRunError",
    "DurableModel",
    "EventStoreRunner",
    "EventStoreSession",
    "RecordedToolError",
    "ResponsesCompactor",
    "SessionItemError",
    "mirrored_call_id",
]
