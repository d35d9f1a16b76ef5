"""google-adk session and artifact services on the event store (``pip install
'agent-eventstore[adk]'``).

``EventStoreSessionService`` is a ``google.adk.sessions.BaseSessionService``;
``EventStoreArtifactService`` a ``google.adk.artifacts.BaseArtifactService``. Pass either a
store URL or an open ``EventStore``::

    runner = Runner(agent=agent, app_name="app",
                    session_service=EventStoreSessionService("sessions.db"))

ADK events are stored natively where the store's event model has the field (so ``evs show``,
``evs pending`` and ``verify`` read them) and losslessly otherwise (``EXTENSION_KEY``).
"""

from __future__ import annotations

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.integrations.adk needs google-adk: install agent-eventstore[adk]"
    ) from exc

from ._adk_artifacts import EventStoreArtifactService
from ._adk_events import EXTENSION_KEY, event_from_adk_json, event_to_adk_json
from ._adk_sessions import EventStoreSessionService, from_adk_event, to_adk_events

__all__ = [
    "EXTENSION_KEY",
    "EventStoreArtifactService",
    "EventStoreSessionService",
    "event_from_adk_json",
    "event_to_adk_json",
    "from_adk_event",
    "to_adk_events",
]
