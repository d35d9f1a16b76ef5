"""The loop's public names are exported from ``runtime`` and documented."""

from __future__ import annotations

import inspect

import runtime

LOOP_NAMES = {
    "AfterModelCallback",
    "Agent",
    "AgentCallbacks",
    "BeforeModelCallback",
    "ClaimedCalls",
    "CompactionConfig",
    "ContentsProcessor",
    "InstructionProvider",
    "InstructionsProcessor",
    "InvocationContext",
    "LiveChunk",
    "LiveToolStream",
    "LoopRequestProcessor",
    "MergedResponses",
    "Model",
    "ModelResponse",
    "ModelSummarizer",
    "NoResumePlanner",
    "PlannedCall",
    "Plugin",
    "ResumePlan",
    "ResumePlanner",
    "RunResult",
    "RunStatus",
    "Runner",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedModel",
    "SessionConflictError",
    "StepExecution",
    "StoreArtifactService",
    "StreamingFunctionTool",
    "StreamingModel",
    "Summarizer",
    "SummaryRequest",
    "ToolsProcessor",
    "build_contents",
    "claim_calls",
    "compact",
    "deep_merge",
    "default_request_processors",
    "execute_calls",
    "merge_outcomes",
    "new_call_id",
    "new_invocation_id",
    "run_claimed",
    "streaming_tool",
}


def test_loop_names_are_exported() -> None:
    assert set(runtime.__all__) >= LOOP_NAMES
    assert list(runtime.__all__) == sorted(runtime.__all__)


def test_loop_classes_and_functions_have_docstrings() -> None:
    undocumented = [
        name
        for name in sorted(LOOP_NAMES)
        if (inspect.isclass(getattr(runtime, name)) or inspect.isfunction(getattr(runtime, name)))
        and not inspect.getdoc(getattr(runtime, name))
    ]
    assert undocumented == []
