"""Replay processors: everything the runtime decides from the log when it resumes a session.

Confirmation recovery, the resume planner (dedup and crash policy), the pending report, the
public answer APIs and load_artifacts. The processors are pure functions of the events they are
given (newest first, stopping early); I/O stays in the answer APIs and the loop's hooks.
"""

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
from runtime.replay._resume import (
    RERUN_DECISION_KEY,
    InDoubtCall,
    PlannedCall,
    ResumeDecision,
    ResumeScan,
    plan_resume,
    rerun_call_ids,
)

__all__ = [
    "RERUN_DECISION_KEY",
    "BackwardScan",
    "ConfirmationRecovery",
    "ConfirmationScan",
    "ConfirmedCall",
    "InDoubtCall",
    "PendingCall",
    "PendingKind",
    "PendingReport",
    "PlannedCall",
    "Refusal",
    "RefusalKind",
    "ResumeDecision",
    "ResumeScan",
    "feed_all",
    "feed_store",
    "pending",
    "plan_resume",
    "recover_confirmations",
    "rerun_call_ids",
]
