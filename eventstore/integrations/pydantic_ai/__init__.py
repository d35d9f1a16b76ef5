"""Pydantic AI agents on the event store (``pip install 'agent-eventstore[pydantic-ai]'``)::

    agent = EventStoreAgent(Agent(model, tools=[...]), store="sessions.db")
    result = await agent.run("Hi", session_id="chat-1")
    result = await agent.run(None, session_id="chat-1")   # continue it after a crash

A fourth door to the store, the one where replay-based resume is the product: each model
request and response, each tool call's claim and result, each approval and external result is
an event of the session's log as it happens (docs/pydantic-ai.md). The rooms, named after
pydantic-ai's ``durable_exec`` packages: ``agent`` (``EventStoreAgent``, a ``WrapperAgent``),
``model`` (``EventStoreModel``), ``toolset`` (``EventStoreToolset``: function tools, MCP servers
and any other toolset), ``messages`` (``ModelMessage`` ↔ our events), ``deferred``
(``DeferredToolRequests`` ↔ confirmations and awaited results), ``journal`` (the run's writer).
"""

from __future__ import annotations

try:
    import pydantic_ai.agent  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.integrations.pydantic_ai needs pydantic-ai-slim: install "
        "agent-eventstore[pydantic-ai]"
    ) from exc

from .agent import EventStoreAgent, SessionAddress
from .journal import RunJournal, SessionMovedError
from .messages import MESSAGE_KEY, messages_of
from .model import EventStoreModel
from .toolset import IN_DOUBT_KEY, EventStoreToolset

__all__ = [
    "IN_DOUBT_KEY",
    "MESSAGE_KEY",
    "EventStoreAgent",
    "EventStoreModel",
    "EventStoreToolset",
    "RunJournal",
    "SessionAddress",
    "SessionMovedError",
    "messages_of",
]
