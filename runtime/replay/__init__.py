"""Replay processors: everything the runtime decides from the log when it resumes a session.

Confirmation recovery, the resume planner (dedup and crash policy), the pending report, the
public answer APIs and load_artifacts. The processors are pure functions of the events they are
given (newest first, stopping early); I/O stays in the answer APIs and the loop's hooks.
``AgentTool`` runs a ``Runner``, so it lives beside the runner (``runtime.AgentTool``), not here.
"""

from runtime.replay._artifacts import (
    LOAD_ARTIFACTS,
    LoadArtifactsProcessor,
    LoadArtifactsTool,
    LoadedArtifactsScan,
    requested_artifacts,
)
from runtime.replay._children import session_pending
from runtime.replay._confirmations import (
    ConfirmationRecovery,
    ConfirmationScan,
    ConfirmedCall,
    Refusal,
    RefusalKind,
    recover_confirmations,
)
from runtime.replay._log import (
    CLAIMED_BY_KEY,
    PARENT_LINK_KEY,
    BackwardScan,
    child_session_id,
    feed_all,
    feed_store,
)
from runtime.replay._pending import (
    NextRun,
    NextStep,
    PendingCall,
    PendingKind,
    PendingReport,
    pending,
)
from runtime.replay._planner import ReplayResumePlanner, decide
from runtime.replay._respond import (
    answer_confirmation,
    open_child_sessions,
    rerun_call,
    submit_response,
)
from runtime.replay._resume import (
    RERUN_DECISION_KEY,
    HeadScan,
    HeadStatus,
    InDoubtCall,
    ResumeCall,
    ResumeDecision,
    ResumeReason,
    ResumeScan,
    UntrustedEvent,
    plan_resume,
    rerun_call_ids,
)

__all__ = [
    "BackwardScan",
    "CLAIMED_BY_KEY",
    "ConfirmationRecovery",
    "ConfirmationScan",
    "ConfirmedCall",
    "HeadScan",
    "HeadStatus",
    "InDoubtCall",
    "LOAD_ARTIFACTS",
    "LoadArtifactsProcessor",
    "LoadArtifactsTool",
    "LoadedArtifactsScan",
    "NextRun",
    "NextStep",
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
    "UntrustedEvent",
    "answer_confirmation",
    "child_session_id",
    "decide",
    "feed_all",
    "feed_store",
    "open_child_sessions",
    "pending",
    "plan_resume",
    "recover_confirmations",
    "requested_artifacts",
    "rerun_call",
    "rerun_call_ids",
    "session_pending",
    "submit_response",
]
