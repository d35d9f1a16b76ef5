"""Replay processors: everything the runtime decides from the log when it resumes a session.

Confirmation recovery, the resume planner (dedup and crash policy), the pending report, the
public answer APIs and load_artifacts. The processors are pure functions of the events they are
given (newest first, stopping early); I/O stays in the answer APIs and the loop's hooks.
"""

from runtime.replay._agent_tool import (
    FORWARDED_FROM_KEY,
    INTERNAL_STATE_PREFIXES,
    PARENT_LINK_KEY,
    AgentTool,
    child_session_id,
)
from runtime.replay._artifacts import (
    LOAD_ARTIFACTS,
    LoadArtifactsProcessor,
    LoadArtifactsTool,
    LoadedArtifactsScan,
    requested_artifacts,
)
from runtime.replay._confirmations import (
    ConfirmationRecovery,
    ConfirmationScan,
    ConfirmedCall,
    Refusal,
    RefusalKind,
    recover_confirmations,
)
from runtime.replay._log import BackwardScan, feed_all, feed_store
from runtime.replay._pending import PendingCall, PendingKind, PendingReport, pending
from runtime.replay._planner import ReplayResumePlanner, decide
from runtime.replay._respond import answer_confirmation, rerun_call, submit_response
from runtime.replay._resume import (
    RERUN_DECISION_KEY,
    InDoubtCall,
    ResumeCall,
    ResumeDecision,
    ResumeReason,
    ResumeScan,
    plan_resume,
    rerun_call_ids,
)

__all__ = [
    "AgentTool",
    "BackwardScan",
    "ConfirmationRecovery",
    "ConfirmationScan",
    "ConfirmedCall",
    "FORWARDED_FROM_KEY",
    "INTERNAL_STATE_PREFIXES",
    "InDoubtCall",
    "LOAD_ARTIFACTS",
    "LoadArtifactsProcessor",
    "LoadArtifactsTool",
    "LoadedArtifactsScan",
    "PARENT_LINK_KEY",
    "PendingCall",
    "PendingKind",
    "PendingReport",
    "RERUN_DECISION_KEY",
    "Refusal",
    "RefusalKind",
    "ReplayResumePlanner",
    "ResumeCall",
    "ResumeDecision",
    "ResumeReason",
    "ResumeScan",
    "answer_confirmation",
    "child_session_id",
    "decide",
    "feed_all",
    "feed_store",
    "pending",
    "plan_resume",
    "recover_confirmations",
    "requested_artifacts",
    "rerun_call",
    "rerun_call_ids",
    "submit_response",
]
