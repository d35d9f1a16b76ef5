"""The agent runtime: tools, tool contexts, declarations and the agent loop over the event log.

Subpackages: ``runtime.tools`` (tool protocols, function tools, toolsets, the execution pipeline)
and ``runtime.declarations`` (the provider-neutral declaration IR and its translators).
"""

from runtime._agent import Agent, InstructionProvider
from runtime._callbacks import AfterModelCallback, AgentCallbacks, BeforeModelCallback
from runtime._contents import build_contents
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
    ScriptExhaustedError,
    SessionConflictError,
    ToolCallError,
    ToolContextError,
    ToolDefinitionError,
    ToolNotFoundError,
    ToolResultError,
    ToolSignal,
    ToolValidationRefused,
)
from runtime._execute import StepExecution, execute_calls
from runtime._invocation import (
    InvocationContext,
    LoopRequestProcessor,
    NoResumePlanner,
    PlannedCall,
    ResumePlan,
    ResumePlanner,
    RunResult,
    RunStatus,
    new_invocation_id,
)
from runtime._merge import MergedResponses, deep_merge, merge_outcomes
from runtime._model import Model, ModelResponse, new_call_id
from runtime._plugins import Plugin
from runtime._processors import (
    ContentsProcessor,
    InstructionsProcessor,
    ToolsProcessor,
    default_request_processors,
)
from runtime._runner import Runner, StoreArtifactService
from runtime._scripted import ScriptedModel, ScriptStep
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
    "AfterModelCallback",
    "Agent",
    "AgentCallbacks",
    "AgentRuntimeError",
    "ArtifactService",
    "BeforeModelCallback",
    "CallOutcome",
    "ConfirmationRequired",
    "ContentsProcessor",
    "FilteredToolset",
    "FunctionDeclaration",
    "FunctionTool",
    "InMemoryArtifactService",
    "InstructionProvider",
    "InstructionsProcessor",
    "InvalidToolArgumentsError",
    "InvocationContext",
    "ListToolset",
    "LoopRequestProcessor",
    "MergedResponses",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "NoResumePlanner",
    "PlannedCall",
    "Plugin",
    "ReadonlyContext",
    "ResumePlan",
    "ResumePlanner",
    "RunResult",
    "RunStatus",
    "Runner",
    "RuntimeUsageError",
    "SchemaConversionError",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedModel",
    "SessionConflictError",
    "StateView",
    "StepExecution",
    "StoreArtifactService",
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
    "ToolsProcessor",
    "Toolset",
    "ToolsetClass",
    "build_contents",
    "build_tool_request",
    "deep_merge",
    "default_request_processors",
    "execute_calls",
    "execute_function_call",
    "function_tool",
    "idempotency_key",
    "merge_outcomes",
    "new_call_id",
    "new_invocation_id",
    "tool_method",
]
