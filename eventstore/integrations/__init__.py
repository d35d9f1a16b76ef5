"""Backends for other agent frameworks, one module per framework, each behind its own extra.

Importing ``eventstore`` never imports a framework; import the module you need, e.g.
``from eventstore.integrations.adk_memory import EventStoreMemoryService`` (``[adk]``).
"""
