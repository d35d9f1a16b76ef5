"""Session backends for other agent frameworks, each behind its own extra.

- ``eventstore.integrations.adk``: google-adk's ``BaseSessionService`` and
  ``BaseArtifactService`` on the event store (``pip install 'agent-eventstore[adk]'``).
- ``eventstore.integrations.openai_agents``: the OpenAI Agents SDK's ``Session`` protocol on the
  event store (``pip install 'agent-eventstore[openai-agents]'``).
- ``eventstore.integrations.langgraph``: a LangGraph checkpointer (``BaseCheckpointSaver``) on the
  event store (``pip install 'agent-eventstore[langgraph]'``).
- ``eventstore.integrations.adk_memory``: google-adk's ``BaseMemoryService`` over the store's
  memory of past sessions (``[adk]``).

Importing this package imports no framework; importing one of its modules without its extra
raises ImportError naming the extra.
"""

__all__: list[str] = []
