"""Tools: the small ``Tool`` protocol, capability protocols, function tools, toolsets, request
packing and the safe execution pipeline of one function call."""

from runtime.tools._base import (
    ConfirmationGate,
    FunctionToolLike,
    ResponseDeferrer,
    SkipSummarizationResultDisplayer,
    StreamingTool,
    Tool,
    is_idempotent,
    requires_confirmation,
)
from runtime.tools._errors import ToolErrorKind, error_response
from runtime.tools._examples import (
    Example,
    ExampleCall,
    ExampleProvider,
    ExampleTool,
    format_examples,
    newest_user_text,
)
from runtime.tools._function import (
    ConfirmationPredicate,
    FunctionTool,
    ToolOptions,
    ToolsetClass,
    function_tool,
    tool_method,
)
from runtime.tools._memory_tools import (
    LOAD_MEMORY,
    LoadMemoryTool,
    PreloadMemoryTool,
    format_memories,
)
from runtime.tools._model_request import ModelRequest, RequestProcessor
from runtime.tools._pipeline import (
    NO_CALLBACKS,
    AfterToolCallback,
    BeforeToolCallback,
    CallOutcome,
    OnToolErrorCallback,
    ToolCallbacks,
    ToolCallObserver,
    execute_function_call,
)
from runtime.tools._registry import ToolRegistry
from runtime.tools._request import build_tool_request, duplicate_tool_error, pack_tool
from runtime.tools._safe import (
    NO_RESPONSE,
    RESULT_NOT_DECODED,
    SafeResult,
    SafeTool,
    ToolFailure,
    ToolSuccess,
)
from runtime.tools._schema import parse_docstring
from runtime.tools._terminate import TERMINATE_ARGUMENT, TERMINATE_TOOL_NAME, TerminationTool
from runtime.tools._toolset import FilteredToolset, ListToolset, ToolPredicate, Toolset

__all__ = [
    "AfterToolCallback",
    "BeforeToolCallback",
    "CallOutcome",
    "ConfirmationGate",
    "ConfirmationPredicate",
    "Example",
    "ExampleCall",
    "ExampleProvider",
    "ExampleTool",
    "FilteredToolset",
    "FunctionTool",
    "FunctionToolLike",
    "LOAD_MEMORY",
    "ListToolset",
    "LoadMemoryTool",
    "ModelRequest",
    "NO_CALLBACKS",
    "NO_RESPONSE",
    "OnToolErrorCallback",
    "PreloadMemoryTool",
    "RESULT_NOT_DECODED",
    "RequestProcessor",
    "ResponseDeferrer",
    "SafeResult",
    "SafeTool",
    "SkipSummarizationResultDisplayer",
    "StreamingTool",
    "TERMINATE_ARGUMENT",
    "TERMINATE_TOOL_NAME",
    "TerminationTool",
    "Tool",
    "ToolCallObserver",
    "ToolCallbacks",
    "ToolErrorKind",
    "ToolFailure",
    "ToolOptions",
    "ToolPredicate",
    "ToolRegistry",
    "ToolSuccess",
    "Toolset",
    "ToolsetClass",
    "build_tool_request",
    "duplicate_tool_error",
    "error_response",
    "execute_function_call",
    "format_examples",
    "format_memories",
    "function_tool",
    "is_idempotent",
    "newest_user_text",
    "pack_tool",
    "parse_docstring",
    "requires_confirmation",
    "tool_method",
]
