"""The import path ``eventstore.integrations.adk_memory`` of earlier releases: google-adk's
``BaseMemoryService`` over the store's memory, now ``eventstore.integrations.adk.memory`` (and
exported by ``eventstore.integrations.adk``). Needs the ``[adk]`` extra."""

from __future__ import annotations

from .adk.memory import EventStoreMemoryService, to_adk_memory

__all__ = ["EventStoreMemoryService", "to_adk_memory"]
