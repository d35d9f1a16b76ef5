"""Errors of the MCP toolset.

The tree (under the runtime's own, see ``runtime._exceptions``)::

    AgentRuntimeError
    ├── RuntimeUsageError
    │   └── MCPConfigurationError   an MCPToolset was configured in a way that cannot work
    ├── MCPConnectionError          the MCP server cannot be reached (also after one reconnect),
    │                               or failed so recently that it is not tried yet
    └── ToolCallError
        └── MCPToolError            the server ran the tool and reported ``isError``

Both call-time errors become structured ``execution_failed`` responses in the tool pipeline; the
loop never sees them raised. ``MCPToolset.tools`` never raises ``MCPConnectionError`` either: a
request built while the server is away declares its last listed tools (or none).
"""

from __future__ import annotations

from runtime._exceptions import AgentRuntimeError, RuntimeUsageError, ToolCallError

__all__ = ["MCPConfigurationError", "MCPConnectionError", "MCPToolError"]


class MCPConfigurationError(RuntimeUsageError):
    """An ``MCPToolset`` option is invalid (e.g. both ``names`` and ``predicate`` given)."""


class MCPConnectionError(AgentRuntimeError):
    """The MCP server cannot be reached, or the connection dropped and reconnecting did not help.

    ``server`` describes the server (command line or URL); ``may_have_run`` is True when the
    connection dropped while a call was in flight, so the server may have executed it;
    ``retry_in`` is set (seconds) when nothing was attempted because the last attempt to connect
    failed less than the retry delay ago, and is ``None`` when this error comes from an attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        server: str,
        may_have_run: bool = False,
        retry_in: float | None = None,
    ) -> None:
        super().__init__(message)
        self.server = server
        self.may_have_run = may_have_run
        self.retry_in = retry_in


class MCPToolError(ToolCallError):
    """The MCP server answered a call with ``isError: true``; the message is the server's text."""

    def __init__(self, tool_name: str, *, server_text: str) -> None:
        super().__init__(
            f"The MCP tool {tool_name!r} reported an error: {server_text or '(no text)'}",
            tool_name=tool_name,
        )
        self.server_text = server_text
