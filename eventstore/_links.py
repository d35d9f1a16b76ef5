"""How a child session (an agent run as a tool) names and links to its parent call.

The store owns these two rules so that store-only tools (``python -m eventstore.commands
show``) find children exactly as the runtime creates them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from ._events import Event

__all__ = ["PARENT_LINK_KEY", "child_session_id", "parent_link"]

PARENT_LINK_KEY = "parent"
"""``custom_metadata`` key of a child session's first event: the parent session and call (an
agent run as a tool; written by the runtime's ``AgentTool``)."""


def child_session_id(parent_session_id: str, call_id: str) -> str:
    """Return the child session id of one parent call (stable; at most 255 characters)."""
    readable = f"{parent_session_id}/{call_id}"
    if len(readable) <= 255:
        return readable
    digest = hashlib.sha256(f"{parent_session_id}\0{call_id}".encode()).hexdigest()[:32]
    return f"{parent_session_id[:200]}/{digest}"


def parent_link(event: Event) -> tuple[str, str] | None:
    """The (parent session id, parent call id) a child session's link event names, or None."""
    link = event.custom_metadata.get(PARENT_LINK_KEY)
    if not isinstance(link, Mapping):
        return None
    session, call = link.get("session_id"), link.get("function_call_id")
    if isinstance(session, str) and isinstance(call, str):
        return session, call
    return None
