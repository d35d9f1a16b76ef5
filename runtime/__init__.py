"""The agent runtime: tools, tool contexts, declarations and the agent loop over the event log.

Subpackages: ``runtime.tools`` (tool protocols, function tools, toolsets, the execution pipeline)
and ``runtime.declarations`` (the provider-neutral declaration IR and its translators).
"""

from runtime._context import (
    ArtifactService,
    InMemoryArtifactService,
    ReadonlyContext,
    StateView,
    ToolActions,
    ToolContext,
    idempotency_key,
)
from runtime._exceptions import (
    AgentRuntimeError,
    ConfirmationRequired,
    InvalidToolArgumentsError,
    RuntimeUsageError,
    SchemaConversionError,
    ToolCallError,
    ToolContextError,
    ToolDefinitionError,
    ToolNotFoundError,
    ToolResultError,
    ToolSignal,
    ToolValidationRefused,
)
from runtime.declarations import FunctionDeclaration
from runtime.tools import (
    CallOutcome,
    FilteredToolset,
    FunctionTool,
    ListToolset,
    ModelRequest,
    Tool,
    ToolErrorKind,
    Toolset,
    ToolsetClass,
    build_tool_request,
    execute_function_call,
    function_tool,
    tool_method,
)

__all__ = [
    "AgentRuntimeError",
    "ArtifactService",
    "CallOutcome",
    "ConfirmationRequired",
    "FilteredToolset",
    "FunctionDeclaration",
    "FunctionTool",
    "InMemoryArtifactService",
    "InvalidToolArgumentsError",
    "ListToolset",
    "ModelRequest",
    "ReadonlyContext",
    "RuntimeUsageError",
    "SchemaConversionError",
    "StateView",
    "Tool",
    "ToolActions",
    "ToolCallError",
    "ToolContext",
    "ToolContextError",
    "ToolDefinitionError",
    "ToolErrorKind",
    "ToolNotFoundError",
    "ToolResultError",
    "ToolSignal",
    "ToolValidationRefused",
    "Toolset",
    "ToolsetClass",
    "build_tool_request",
    "execute_function_call",
    "function_tool",
    "idempotency_key",
    "tool_method",
]
