"""The structured error responses the model receives when a call does not produce a result."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ToolErrorKind", "error_response"]


class ToolErrorKind(enum.StrEnum):
    """Why a call has no regular result. The values are stored in the log; never rename them."""

    NOT_FOUND = "not_found"
    """No tool of that name in the execution table."""
    INVALID_ARGUMENTS = "invalid_arguments"
    """The arguments do not fit the tool's schema."""
    VALIDATION_REFUSED = "validation_refused"
    """The tool refused the arguments (``ToolValidationRefused``)."""
    EXECUTION_FAILED = "execution_failed"
    """The tool (or a callback) raised, or its result could not be converted."""
    CONFIRMATION_REQUIRED = "confirmation_required"
    """The call waits for a human confirmation; it did not run."""
    CONFIRMATION_REJECTED = "confirmation_rejected"
    """A human rejected the call; it did not run."""


def error_response(kind: ToolErrorKind, *, tool: str, message: str) -> dict[str, Any]:
    """Return ``{"error": {"kind": kind, "tool": tool, "message": message}}`` (JSON values only)."""
    return {"error": {"kind": kind.value, "tool": tool, "message": message}}
