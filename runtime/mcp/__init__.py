"""Tools from MCP servers, on the official ``mcp`` SDK (the ``[mcp]`` extra).

``MCPToolset`` exposes the tools of one server — a stdio subprocess (``StdioServer``) or a
streamable-HTTP endpoint (``StreamableHttpServer``) — as function tools of the runtime: schemas
translated to the declaration IR, calls through the usual pipeline, results mapped to JSON and
artifacts. Importing this package without the SDK raises one ``ImportError`` naming the extra.
"""

try:
    import mcp as _sdk  # noqa: F401
    import mcp_types as _sdk_types  # noqa: F401 - only in mcp >= 2
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"runtime.mcp needs the MCP SDK 2.x: install agent-eventstore[mcp] ({exc})"
    ) from exc

from runtime.mcp._connection import MCPConnection, ProtocolMode, StdioServer, StreamableHttpServer
from runtime.mcp._exceptions import MCPConfigurationError, MCPConnectionError, MCPToolError
from runtime.mcp._results import PendingArtifact, PlannedResult, map_result, plan_result
from runtime.mcp._toolset import (
    IDEMPOTENCY_KEY_META,
    MCPConfirmation,
    MCPTool,
    MCPToolPredicate,
    MCPToolset,
)

__all__ = [
    "IDEMPOTENCY_KEY_META",
    "MCPConfigurationError",
    "MCPConfirmation",
    "MCPConnection",
    "MCPConnectionError",
    "MCPTool",
    "MCPToolError",
    "MCPToolPredicate",
    "MCPToolset",
    "PendingArtifact",
    "PlannedResult",
    "ProtocolMode",
    "StdioServer",
    "StreamableHttpServer",
    "map_result",
    "plan_result",
]
