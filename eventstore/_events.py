"""The event model: immutable values that make up a session's log.

The shape follows the common agent frameworks (ADK's ``Event``: content parts plus actions) so
that adapters and importers stay thin. Every record is a frozen, slotted, keyword-only dataclass:
cheap to build, and serialized by orjson without an intermediate dict. Mappings inside an event
(``args``, ``response``, ``state_delta`` …) are plain dicts for speed; treat them as read-only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import urandom as _urandom
from typing import Any, Final, Literal

from ._exceptions import InvalidEventError

__all__ = [
    "REQUEST_CONFIRMATION_FUNCTION",
    "ArtifactRef",
    "Compaction",
    "Content",
    "Event",
    "EventActions",
    "FunctionCall",
    "FunctionResponse",
    "Part",
    "ToolConfirmation",
    "new_event_id",
]

REQUEST_CONFIRMATION_FUNCTION = "adk_request_confirmation"
"""Name of the function call the runtime emits to ask a human to confirm another call.

The same name ADK uses, so histories imported from ADK keep their meaning."""

Role = Literal["user", "model"]


_UUID4_CLEAR: Final = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID4_SET: Final = (0x4000 << 64) | (0x8000 << 48)
"""A UUID4's fixed bits: version 4 (bits 76-79) and the RFC 4122 variant (bits 62-63)."""


def new_event_id() -> str:
    """Return a fresh, globally unique event id (a UUID4 in hex)."""
    # What uuid.uuid4().hex returns, from 16 fresh bytes of os.urandom per id as uuid4 draws
    # them, without building a UUID object (half the cost). Never a pool of ids drawn ahead:
    # a forked or snapshot-cloned process would hand out the same ones. uuid.uuid4 is not
    # called, so a caller that patches it to number its own ids (LangGraph's tests do) does
    # not see its sequence consumed by the store's event ids.
    return f"{int.from_bytes(_urandom(16), 'big') & _UUID4_CLEAR | _UUID4_SET:032x}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCall:
    """A call of a tool, as the model emitted it."""

    id: str
    """Call id; unique within the session. Responses and confirmations refer to it."""
    name: str
    """Name of the tool the model wants to run."""
    args: dict[str, Any] = field(default_factory=dict)
    """Arguments as produced by the model (JSON values)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionResponse:
    """The result of a tool call, sent back to the model."""

    id: str
    """Id of the function call this answers."""
    name: str
    """Name of the tool that produced it."""
    response: dict[str, Any] = field(default_factory=dict)
    """The result mapping (JSON values); errors carry an ``error`` key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRef:
    """A reference to a stored artifact version (the bytes live in the artifact store)."""

    filename: str
    """Artifact filename; a ``user:`` prefix means user-scoped."""
    version: int
    """Version number, 0 for the first save."""
    mime_type: str = "application/octet-stream"
    """MIME type the artifact was saved with."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One part of a message: exactly one of its fields is set."""

    text: str | None = None
    """Plain text."""
    function_call: FunctionCall | None = None
    """A tool call emitted by the model."""
    function_response: FunctionResponse | None = None
    """A tool result."""
    artifact: ArtifactRef | None = None
    """A reference to an artifact version."""

    def __post_init__(self) -> None:
        filled = (
            (self.text is not None)
            + (self.function_call is not None)
            + (self.function_response is not None)
            + (self.artifact is not None)
        )
        if filled != 1:
            raise ValueError(
                f"A Part must have exactly one of text, function_call, function_response or "
                f"artifact set; this one has {filled}."
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Content:
    """A message: a role and its ordered parts."""

    role: Role
    """``user`` for user input and tool results, ``model`` for model output."""
    parts: tuple[Part, ...] = ()
    """The parts, in order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolConfirmation:
    """A confirmation asked of (or given by) a human for one tool call."""

    hint: str = ""
    """What to show the human."""
    confirmed: bool = False
    """Whether the call was confirmed (False while only requested)."""
    payload: Any = None
    """Free JSON data passed along with the request or the answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """A summary that stands for the session's events up to ``end_seq`` (docs/compaction.md).

    Recorded by a compaction event (an event with no content whose ``actions.compaction`` is
    set); nothing is deleted. The model's request is built from the newest compaction's
    ``summary`` plus the events after ``end_seq``. The covered range holds no open item (an
    unanswered call, confirmation or long-running call): the runtime refuses such a compaction.
    """

    start_seq: int
    """First seq of the events the summary was made from (an earlier compaction's summary,
    which the summarizer was given, stands for the events before it)."""
    end_seq: int
    """Last seq the summary covers (inclusive); the request goes on with the events after it."""
    summary: Content
    """What the model sees instead of the events up to ``end_seq``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventActions:
    """Side effects an event carries besides its content."""

    state_delta: dict[str, Any] = field(default_factory=dict)
    """State changes, folded in ``seq`` order: each value (``None`` included) replaces the
    key's value whole."""
    state_deletions: tuple[str, ...] = ()
    """State keys this event deletes (after ``state_delta`` is applied; a key may not be in
    both). Deleting a key that is not set does nothing."""
    artifact_delta: dict[str, int] = field(default_factory=dict)
    """Artifact filename -> the version this event produced."""
    requested_tool_confirmations: dict[str, ToolConfirmation] = field(default_factory=dict)
    """Original function call id -> the confirmation requested for it."""
    skip_summarization: bool = False
    """The model is not called again after this tool response."""
    escalate: bool = False
    """The agent hands control up to its parent."""
    transfer_to_agent: str | None = None
    """Name of the agent control is transferred to."""
    compaction: Compaction | None = None
    """Set on a compaction event: the summary and the seq range it stands for."""

    def is_empty(self) -> bool:
        """Return True when the actions carry nothing."""
        return not (
            self.state_delta
            or self.state_deletions
            or self.artifact_delta
            or self.requested_tool_confirmations
            or self.skip_summarization
            or self.escalate
            or self.transfer_to_agent
            or self.compaction
        )


_NO_ACTIONS = EventActions()


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One immutable entry of a session's log.

    ``seq`` is ``None`` on an event that was not stored yet; the store returns copies with ``seq``
    set to the event's position in the session (1, 2, 3 … with no gap). ``seq`` is not part of the
    stored payload, so re-appending an event that the store returned is an idempotent no-op.
    """

    author: str
    """``user`` or the name of the agent that produced the event."""
    id: str = field(default_factory=new_event_id)
    """Event id, unique within the session (re-appending the same id is idempotent)."""
    invocation_id: str = ""
    """Id of the agent invocation that produced the event."""
    branch: str | None = None
    """Agent path (``root.child``) for events of nested agents."""
    timestamp: float = field(default_factory=time.time)
    """Creation time, seconds since the epoch."""
    content: Content | None = None
    """The message, if any."""
    actions: EventActions = _NO_ACTIONS
    """Side effects: state delta, artifact delta, confirmations, control flags. A mapping of
    EventActions' fields is accepted and validated into one (an unknown field or a value of
    the wrong type raises InvalidEventError)."""
    long_running_tool_ids: tuple[str, ...] = ()
    """Ids of function calls in this event whose response arrives later."""
    started_call_ids: tuple[str, ...] = ()
    """Ids of function calls whose execution this event claims (appended before a tool runs)."""
    partial: bool = False
    """A streaming fragment; partial events are never stored."""
    turn_complete: bool = False
    """The model finished its turn."""
    error_code: str | None = None
    """Machine-readable error code when the step failed."""
    error_message: str | None = None
    """Human-readable error message when the step failed."""
    custom_metadata: dict[str, Any] = field(default_factory=dict)
    """Free JSON metadata that never reaches the model."""
    seq: int | None = None
    """Position in the session's log, assigned by the store; ``None`` before it is stored."""

    def __post_init__(self) -> None:
        if type(self.actions) is not EventActions:
            object.__setattr__(self, "actions", _actions_from(self.id, self.actions))

    def function_calls(self) -> list[FunctionCall]:
        """Return the function calls of this event, in part order."""
        if self.content is None:
            return []
        return [p.function_call for p in self.content.parts if p.function_call is not None]

    def function_responses(self) -> list[FunctionResponse]:
        """Return the function responses of this event, in part order."""
        if self.content is None:
            return []
        return [p.function_response for p in self.content.parts if p.function_response is not None]

    def text(self) -> str:
        """Return the concatenated text parts (empty when there are none)."""
        if self.content is None:
            return ""
        return "".join(p.text for p in self.content.parts if p.text is not None)

    def is_final_response(self) -> bool:
        """Return True when this event ends the agent's turn (ADK's rule).

        Final: skip-summarization, or long-running calls handed back, or a model message with no
        function calls, no function responses and not partial.
        """
        if self.actions.skip_summarization or self.long_running_tool_ids:
            return True
        return not (self.function_calls() or self.function_responses() or self.partial)


_ACTION_FIELDS = frozenset(f.name for f in dataclasses.fields(EventActions))
_actions_adapter: Any = None


def _actions_from(event_id: str, actions: object) -> EventActions:
    """Validate a mapping of EventActions' fields into EventActions (nested mappings become
    ToolConfirmation, Compaction and Content), as a pydantic model would take it."""
    if isinstance(actions, EventActions):
        return actions
    if not isinstance(actions, Mapping):
        raise InvalidEventError(
            f"Event {event_id!r}: actions must be an EventActions or a mapping of its fields, "
            f"not a {type(actions).__name__}.", event_id=event_id)
    mapping: Mapping[Any, Any] = actions
    unknown = sorted(repr(k) for k in mapping if k not in _ACTION_FIELDS)
    if unknown:
        raise InvalidEventError(
            f"Event {event_id!r}: actions has unknown fields {', '.join(unknown)}; EventActions "
            f"has {', '.join(sorted(_ACTION_FIELDS))}.", event_id=event_id)
    import pydantic  # only here: most events are built with EventActions

    global _actions_adapter
    if _actions_adapter is None:
        _actions_adapter = pydantic.TypeAdapter(EventActions)
    try:
        validated: EventActions = _actions_adapter.validate_python(dict(mapping))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise InvalidEventError(
            f"Event {event_id!r}: actions cannot be read as EventActions ({problems}).",
            event_id=event_id) from exc
    return validated
