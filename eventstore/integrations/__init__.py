"""Session backends for other agent frameworks: one package per framework, each behind its own
extra, with rooms named after the framework's own concepts.

- ``eventstore.integrations.adk``: google-adk's ``BaseSessionService``, ``BaseArtifactService``
  and ``BaseMemoryService`` on the event store (``pip install 'agent-eventstore[adk]'``); rooms
  ``sessions``, ``events``, ``build``, ``compaction``, ``artifacts``, ``memory``.
- ``eventstore.integrations.openai_agents``: the OpenAI Agents SDK's ``Session`` protocol on the
  event store (``pip install 'agent-eventstore[openai-agents]'``); rooms ``session``, ``items``,
  ``compaction``.
- ``eventstore.integrations.langgraph``: a LangGraph checkpointer (``BaseCheckpointSaver``) on the
  event store (``pip install 'agent-eventstore[langgraph]'``); rooms ``saver``, ``checkpoints``,
  ``log``, ``preview``, ``loop``.
- ``eventstore.integrations._handle``: the machinery every door shares (a store opened from a
  URL or given open, and the loop it lives on).

Each package imports only the store's public API (``eventstore``), its own rooms and
``_handle``, never another framework's package (``tests/test_import_layout.py``). Importing this
package imports no framework; importing one of its packages without its extra raises ImportError
naming the extra. ``eventstore.integrations.adk_memory`` is the memory service's import path of
earlier releases, kept.
"""

__all__: list[str] = []
