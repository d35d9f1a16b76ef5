"""google-adk's session, artifact and memory services on the event store (``pip install
'agent-eventstore[adk]'``).

``EventStoreSessionService`` is a ``google.adk.sessions.BaseSessionService``;
``EventStoreArtifactService`` a ``google.adk.artifacts.BaseArtifactService``;
``EventStoreMemoryService`` a ``google.adk.memory.BaseMemoryService``;
``EventStoreDurabilityPlugin`` an ADK plugin that makes a resumable app's tools run at most once
across crashes (``durability``). Pass the session and
artifact services either a store URL or an open ``EventStore``::

    runner = Runner(agent=agent, app_name="app",
                    session_service=EventStoreSessionService("sessions.db"))

ADK events are stored natively where the store's event model has the field (so ``evs show``,
``evs pending`` and ``verify`` read them) and losslessly otherwise (``EXTENSION_KEY``).

The rooms, named after ADK's own services: ``sessions`` (the session service), ``events`` (an
ADK event's stored form, both ways), ``build`` (ADK events built fast from stored rows),
``compaction`` (ADK's event compaction on the store's compaction events), ``durability`` (the
plugin: claims, recorded results, calls in doubt), ``artifacts`` (the
artifact service) and ``memory`` (the memory service). The store's home loop, shared with the
other frameworks' doors, is ``eventstore.integrations._handle``.
"""

from __future__ import annotations

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.integrations.adk needs google-adk: install agent-eventstore[adk]"
    ) from exc

from .artifacts import EventStoreArtifactService
from .durability import IDEMPOTENT_ATTRIBUTE, EventStoreDurabilityPlugin, ToolCallInDoubt
from .events import EXTENSION_KEY, event_from_adk_json, event_to_adk_json
from .memory import EventStoreMemoryService, to_adk_memory
from .sessions import EventStoreSessionService, from_adk_event, to_adk_events

__all__ = [
    "EXTENSION_KEY",
    "IDEMPOTENT_ATTRIBUTE",
    "EventStoreArtifactService",
    "EventStoreDurabilityPlugin",
    "EventStoreMemoryService",
    "EventStoreSessionService",
    "ToolCallInDoubt",
    "event_from_adk_json",
    "event_to_adk_json",
    "from_adk_event",
    "to_adk_events",
    "to_adk_memory",
]
