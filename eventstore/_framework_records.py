"""The records the framework doors keep beside the protocol's events, by their stable keys.

A door writes the protocol's shapes (model turns, claims, responses; docs/protocol.md) for every
reader, and keeps what its framework needs back exactly under its own ``custom_metadata`` key:

- ``openai_agents``: an OpenAI Agents session item (``{"item": …}``, a Responses API item);
- ``openai_agents_run``: what an event means to a durable run (``EventStoreRunner``: its start,
  its ``n``-th item, its end, …);
- ``pydantic_ai_message``: a pydantic-ai ``ModelMessage`` as ``ModelMessagesTypeAdapter``
  writes it.

Most such records ride on protocol events. An event that holds *only* records (no content, no
actions, no claim) is the framework's bookkeeping — a durable run's item copies and its end, a
request whose tool returns are already recorded as responses: nothing in it is news for a
model, so the head rule reads past it (``is_framework_record``), and ``evs show`` / ``evs web``
describe it from the record rather than print it raw. ``eventstore`` never imports the doors
(each needs its extra), so the keys are spelled out here; they are stored strings and never
change.
"""

from __future__ import annotations

from ._events import Event, EventActions

__all__ = [
    "FRAMEWORK_RECORD_KEYS",
    "OPENAI_AGENTS_ITEM_KEY",
    "OPENAI_AGENTS_RUN_KEY",
    "PYDANTIC_AI_MESSAGE_KEY",
    "is_framework_record",
]

OPENAI_AGENTS_ITEM_KEY = "openai_agents"
"""``eventstore.integrations.openai_agents``' ``METADATA_KEY``: a session item."""
OPENAI_AGENTS_RUN_KEY = "openai_agents_run"
"""``eventstore.integrations.openai_agents``' ``RUN_KEY``: a durable run's record."""
PYDANTIC_AI_MESSAGE_KEY = "pydantic_ai_message"
"""``eventstore.integrations.pydantic_ai``' ``MESSAGE_KEY``: a pydantic-ai message."""
FRAMEWORK_RECORD_KEYS = frozenset(
    {OPENAI_AGENTS_ITEM_KEY, OPENAI_AGENTS_RUN_KEY, PYDANTIC_AI_MESSAGE_KEY})
"""Every door's record key."""

_NO_ACTIONS = EventActions()


def is_framework_record(event: Event) -> bool:
    """Whether ``event`` holds only framework doors' records: no content, no actions, no
    claim, and nothing in its metadata but door records (see the module docstring)."""
    return (event.content is None and not event.started_call_ids
            and not event.long_running_tool_ids and bool(event.custom_metadata)
            and event.custom_metadata.keys() <= FRAMEWORK_RECORD_KEYS
            and event.actions == _NO_ACTIONS)
