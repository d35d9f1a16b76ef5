"""Memory tools: ``load_memory`` (the model searches) and ``preload_memory`` (searched for it).

Both read ``eventstore.MemoryService`` under the app and user of the session the tool runs in
(read from the store), so one user's memories never reach another user's requests. What
``load_memory`` found is its function response, stored like any tool result; ``preload_memory``
adds what it found to the request's instructions only (never stored), searching with the
request's newest user text, as ADK's preload-memory tool does. The memory index is an input of
the request like the model's configuration: adding sessions to memory changes later requests.
"""

from __future__ import annotations

from typing import Any

from eventstore import MemoryEntry, MemoryService
from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema
from runtime.tools._examples import newest_user_text
from runtime.tools._model_request import ModelRequest

__all__ = ["LOAD_MEMORY", "LoadMemoryTool", "PreloadMemoryTool", "format_memories"]

LOAD_MEMORY = "load_memory"
"""The name the model calls ``LoadMemoryTool`` by."""


async def _search(
    memory: MemoryService, ctx: ToolContext, query: str, limit: int
) -> list[MemoryEntry]:
    info = await memory.store.session_info(ctx.session_id, app_name=ctx.app_name,
                                           user_id=ctx.user_id)
    return await memory.search_memory(
        app_name=info.app_name, user_id=info.user_id, query=query, limit=limit
    )


def format_memories(entries: list[MemoryEntry]) -> str:
    """The instruction text for remembered events ('' when there are none)."""
    if not entries:
        return ""
    lines = [
        "The following is from your earlier conversations with this user; use it when it "
        "helps with the current request.",
        "<PAST_CONVERSATIONS>",
        *(f"[session {e.session_id}, event {e.seq}] {e.author}: {e.text}" for e in entries),
        "</PAST_CONVERSATIONS>",
    ]
    return "\n".join(lines)


class LoadMemoryTool:
    """A function tool the model calls with a ``query`` to search the user's past sessions.

    Guarantees: answers ``{"memories": [{"session_id", "seq", "author", "text"}, …]}``, best
    match first, only from sessions of the same app and user as the calling session.
    """

    def __init__(self, memory: MemoryService, *, limit: int = 10) -> None:
        self.memory = memory
        """The memory searched."""
        self.limit = limit
        """Most memories one call returns."""

    @property
    def name(self) -> str:
        """``load_memory``."""
        return LOAD_MEMORY

    @property
    def description(self) -> str:
        """What the model reads."""
        return "Search the memory of earlier conversations with this user."

    @property
    def is_long_running(self) -> bool:
        """No."""
        return False

    def declaration(self) -> FunctionDeclaration:
        """One required string parameter, ``query``."""
        return declaration_from_json_schema(
            LOAD_MEMORY,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Words to look for."}},
                "required": ["query"],
            },
        )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        """Search and answer the memories found (raises on a missing or non-string query)."""
        query = args.get("query")
        if not isinstance(query, str):
            raise InvalidToolArgumentsError(LOAD_MEMORY, errors=["query: must be a string"])
        found = await _search(self.memory, ctx, query, self.limit)
        return {
            "memories": [
                {"session_id": e.session_id, "seq": e.seq, "author": e.author, "text": e.text}
                for e in found
            ]
        }

    def __repr__(self) -> str:
        return "LoadMemoryTool()"


class PreloadMemoryTool:
    """A request processor adding the user's relevant memories to every request's instructions.

    Guarantees: searches with the request's newest user text (nothing when there is none or
    nothing matches), only in sessions of the same app and user; never declared to the model.
    """

    def __init__(self, memory: MemoryService, *, limit: int = 5) -> None:
        self.memory = memory
        """The memory searched."""
        self.limit = limit
        """Most memories added to one request."""

    @property
    def name(self) -> str:
        """``preload_memory`` (never declared)."""
        return "preload_memory"

    @property
    def description(self) -> str:
        """What it does."""
        return "Adds relevant memories of earlier conversations to the instructions."

    @property
    def is_long_running(self) -> bool:
        """No."""
        return False

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Append the memories matching the newest user text to ``request.instructions``."""
        query = newest_user_text(request)
        if not query:
            return
        text = format_memories(await _search(self.memory, ctx, query, self.limit))
        if text:
            request.instructions.append(text)

    def __repr__(self) -> str:
        return "PreloadMemoryTool()"
