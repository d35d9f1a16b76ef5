"""Exceptions of the agent runtime.

The tree::

    AgentRuntimeError                    root of every error the runtime raises
    ├── RuntimeUsageError                developer misuse, found before or outside a model call
    │   ├── ToolDefinitionError          a tool, toolset or request cannot be built as given
    │   │   └── SchemaConversionError    a JSON schema cannot become a declaration
    │   ├── ToolContextError             a ToolContext capability this context does not have
    │   ├── ScriptExhaustedError         a ScriptedModel was asked for more responses than given
    │   └── RecordingError               a recorded session (runtime.testing) cannot be read;
    │                                    also a ValueError
    ├── SessionConflictError             another writer moved the session during an invocation
    ├── ReplayError                      an answer or decision the session's log refuses
    │   ├── UnknownCallError             no such call (or confirmation request) in the session
    │   ├── CallAlreadyAnsweredError     the call (or confirmation) already has its response
    │   ├── CallNotInDoubtError          a re-run was decided for a call that is not in doubt
    │   │   └── ResultNotAwaitedError    a result was submitted for a call that awaits none
    │   ├── ConfirmationSupersededError  a newer user message superseded the confirmation
    │   ├── ClaimTooRecentError          a re-run was decided while the claimant may still run
    │   └── CompactionRefusedError       a compaction would cover a call that is still open
    ├── ModelError (runtime.models)      a model call failed (auth, rate limit, overload, bad
    │                                    request, context length, connection); tree drawn in
    │                                    runtime/models/_errors.py
    └── ToolCallError                    one function call failed; the pipeline turns it into a
        │                                structured error response and never re-raises it
        ├── ToolNotFoundError            no tool of that name in the execution table
        ├── InvalidToolArgumentsError    the model's arguments do not fit the tool's schema
        └── ToolResultError              the tool's result cannot be sent to the model

    ToolSignal                           control flow a tool raises on purpose; not an error
    ├── ToolValidationRefused            the tool refuses these arguments, with a message
    └── ConfirmationRequired             the tool needs a human to confirm this call

``ToolSignal`` is deliberately not under ``AgentRuntimeError``: ``except AgentRuntimeError`` must
never swallow a confirmation request. Every error carries the names and ids it is about as
attributes and says them in its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentRuntimeError",
    "CallAlreadyAnsweredError",
    "CallNotInDoubtError",
    "ClaimTooRecentError",
    "CompactionRefusedError",
    "ConfirmationRequired",
    "ConfirmationSupersededError",
    "InvalidToolArgumentsError",
    "RecordingError",
    "ReplayError",
    "ResultNotAwaitedError",
    "RuntimeUsageError",
    "SchemaConversionError",
    "ScriptExhaustedError",
    "SessionConflictError",
    "ToolCallError",
    "ToolContextError",
    "ToolDefinitionError",
    "ToolNotFoundError",
    "ToolResultError",
    "ToolSignal",
    "ToolValidationRefused",
    "UnknownCallError",
]


class AgentRuntimeError(Exception):
    """Root of every error the agent runtime raises."""


# --- developer misuse -----------------------------------------------------------------------------


class RuntimeUsageError(AgentRuntimeError):
    """The runtime was used in a way it does not support (a developer error)."""


class ToolDefinitionError(RuntimeUsageError):
    """A tool, a toolset or a model request cannot be built as given.

    Raised at definition time (decorating a function, defining a toolset class) or while packing a
    request (duplicate tool names). ``tool_name`` names the tool when known.
    """

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class SchemaConversionError(ToolDefinitionError):
    """A JSON schema cannot be converted to the declaration IR.

    ``path`` is the JSON-pointer-like location of the offending node (``#/properties/a/items``).
    """

    def __init__(self, message: str, *, path: str, tool_name: str | None = None) -> None:
        super().__init__(message, tool_name=tool_name)
        self.path = path


class ToolContextError(RuntimeUsageError):
    """A ToolContext was asked for something it cannot do here.

    Examples: loading an artifact when no artifact service was given, or requesting a confirmation
    during request preprocessing (where there is no function call). ``function_call_id`` is the
    context's call id (empty during preprocessing).
    """

    def __init__(self, message: str, *, function_call_id: str) -> None:
        super().__init__(message)
        self.function_call_id = function_call_id


class RecordingError(RuntimeUsageError, ValueError):
    """A recorded session given to ``runtime.testing`` cannot be read.

    ``line`` is the 1-based line of the recording that is not a valid event or header. It is also
    a ``ValueError``: the recording is bad input, like any unparsable value.
    """

    def __init__(self, message: str, *, line: int) -> None:
        super().__init__(message)
        self.line = line


# --- failures of one call -------------------------------------------------------------------------


class ToolCallError(AgentRuntimeError):
    """One function call failed; the pipeline reports it to the model instead of raising."""

    def __init__(self, message: str, *, tool_name: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolNotFoundError(ToolCallError):
    """The model called a tool that is not in the execution table.

    ``available`` lists the names that are, sorted, so the model can correct itself.
    """

    def __init__(self, tool_name: str, *, available: Sequence[str]) -> None:
        names = ", ".join(sorted(available)) or "none"
        super().__init__(
            f"There is no tool named {tool_name!r}; available tools: {names}.",
            tool_name=tool_name,
        )
        self.available = tuple(sorted(available))


class InvalidToolArgumentsError(ToolCallError):
    """The arguments do not validate against the tool's parameter schema.

    ``errors`` holds one line per problem (``location: message``).
    """

    def __init__(self, tool_name: str, *, errors: Sequence[str]) -> None:
        detail = "; ".join(errors) or "invalid arguments"
        super().__init__(f"Invalid arguments for tool {tool_name!r}: {detail}", tool_name=tool_name)
        self.errors = tuple(errors)


class ToolResultError(ToolCallError):
    """The tool returned a value that cannot become a JSON response (or breaks its output type)."""


# --- control-flow signals -------------------------------------------------------------------------


class ToolSignal(Exception):
    """Base of the control-flow signals a tool raises on purpose. Not an error."""


class ToolValidationRefused(ToolSignal):
    """A tool refuses the arguments it was given; ``message`` tells the model what to change.

    The pipeline answers with an error response of kind ``validation_refused`` carrying the message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfirmationRequired(ToolSignal):
    """A tool needs a human to confirm this call before it acts.

    The pipeline records a confirmation request under the call id (with ``hint`` and ``payload``),
    sets skip-summarization and answers with an error response of kind ``confirmation_required``.
    """

    def __init__(self, hint: str = "", *, payload: Any = None) -> None:
        super().__init__(hint or "This tool call requires confirmation.")
        self.hint = hint
        self.payload = payload


# --- the agent loop -------------------------------------------------------------------------------


class ScriptExhaustedError(RuntimeUsageError):
    """A ``ScriptedModel`` was called more often than it has scripted responses.

    ``calls`` is the number of the call that found the script empty (1-based).
    """

    def __init__(self, *, calls: int, scripted: int) -> None:
        super().__init__(
            f"ScriptedModel was called {calls} times but only {scripted} responses were "
            f"scripted; add a response for call {calls} or check why the loop did not stop."
        )
        self.calls = calls
        self.scripted = scripted


class SessionConflictError(AgentRuntimeError):
    """Another writer appended to the session while this invocation was running.

    The invocation stops without writing (the store refused the append because the session was
    not at ``expected_version``); nothing was overwritten and no claimed call was run twice. Run
    the session again to re-plan from the log.
    """

    def __init__(
        self,
        *,
        session_id: str,
        invocation_id: str,
        expected_version: int,
        actual_version: int,
    ) -> None:
        super().__init__(
            f"Session {session_id!r} moved to version {actual_version} while invocation "
            f"{invocation_id!r} expected version {expected_version}; another process wrote to "
            f"it, so this invocation stopped without writing. Run the session again to re-plan."
        )
        self.session_id = session_id
        self.invocation_id = invocation_id
        self.expected_version = expected_version
        self.actual_version = actual_version


# --- answering from outside: responses, confirmations, resume decisions ---------------------------


class ReplayError(AgentRuntimeError):
    """An answer or a resume decision that the session's log refuses; nothing was appended.

    ``session_id`` and ``function_call_id`` (the call or confirmation id given) name what it is
    about.
    """

    def __init__(self, message: str, *, session_id: str, function_call_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.function_call_id = function_call_id


class UnknownCallError(ReplayError):
    """No agent of the session emitted a function call (or confirmation request) with that id."""


class CallAlreadyAnsweredError(ReplayError):
    """The call or confirmation already has its response; it is answered once.

    ``answered_at`` is the ``seq`` of the event holding the existing response.
    """

    def __init__(
        self, message: str, *, session_id: str, function_call_id: str, answered_at: int | None
    ) -> None:
        super().__init__(message, session_id=session_id, function_call_id=function_call_id)
        self.answered_at = answered_at


class CallNotInDoubtError(ReplayError):
    """A re-run was decided for a call that was never started, so nothing is in doubt."""


class ResultNotAwaitedError(CallNotInDoubtError):
    """A result was submitted for a call that awaits none: it was never started (the next run
    executes it, after a confirmation when its tool needs one) or it waits for a confirmation.

    Results are accepted only for a started, unanswered call (long-running or in doubt).
    """


class ConfirmationSupersededError(ReplayError):
    """The user sent a newer message after the confirmation request and before any answer, so
    the request is superseded and can no longer be answered.

    ``message_id`` and ``message_seq`` name the newer message.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        function_call_id: str,
        message_id: str,
        message_seq: int | None,
    ) -> None:
        super().__init__(message, session_id=session_id, function_call_id=function_call_id)
        self.message_id = message_id
        self.message_seq = message_seq


class ClaimTooRecentError(ReplayError):
    """A re-run was decided for a call whose newest claim is younger than the threshold: the
    process that claimed it may still be running it. ``age`` is the claim's age in seconds; pass
    ``min_claim_age=None`` (``evs rerun --force``) to decide anyway."""

    def __init__(self, message: str, *, session_id: str, function_call_id: str, age: float) -> None:
        super().__init__(message, session_id=session_id, function_call_id=function_call_id)
        self.age = age


class CompactionRefusedError(ReplayError):
    """A compaction would cover an open item (docs/compaction.md): a call or confirmation that
    still waits, is in doubt, or would be run or reported by the next run. Nothing was appended.

    ``function_call_id`` is the oldest open call, ``seq`` the event that holds it, and
    ``max_upto`` the largest ``upto`` a compaction may cover now (0: none).
    """

    def __init__(
        self, message: str, *, session_id: str, function_call_id: str, seq: int, max_upto: int
    ) -> None:
        super().__init__(message, session_id=session_id, function_call_id=function_call_id)
        self.seq = seq
        self.max_upto = max_upto
