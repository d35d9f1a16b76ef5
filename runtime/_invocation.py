"""The state of one invocation and the hook points of the loop.

``InvocationContext`` is what every stage of the loop sees: the store, the ids, the agent and the
version of the session this invocation last saw. All writes go through ``ctx.append``, which checks
``expected_version`` — so two processes never both extend the same session unnoticed.

Hook points for resume: ``LoopRequestProcessor`` (request building, run in order) and
``ResumePlanner`` (called once before the first model call of an invocation).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from eventstore import (
    ConcurrencyError,
    Content,
    Event,
    EventActions,
    EventStore,
    FunctionCall,
    ToolConfirmation,
    apply_delta,
)
from runtime._context import ArtifactService, ReadonlyContext
from runtime._exceptions import SessionConflictError
from runtime._protocols import AppendObserver, InvocationAgent
from runtime.tools import ModelRequest, Tool, ToolCallObserver

__all__ = [
    "InvocationContext",
    "LoopRequestProcessor",
    "NoResumePlanner",
    "PlannedCall",
    "ResumePlan",
    "ResumePlanner",
    "RunResult",
    "RunStatus",
    "new_invocation_id",
]

RunStatus: TypeAlias = Literal[
    "completed",
    "paused_for_confirmation",
    "paused_long_running",
    "paused_by_planner",
    "step_limit",
    "stale",
    "escalated",
]
"""How an invocation ended.

- ``completed``: a final response (text without calls, or a skip-summarization result);
- ``paused_for_confirmation``: a confirmation request was appended and waits for an answer;
- ``paused_long_running``: a call has no response yet (long-running or deferred); a turn waits
  for every one of its long-running calls, so results that arrive apart keep it paused with
  the ids still open (``pending_call_ids``) until the last one;
- ``paused_by_planner``: the resume planner asked to pause (e.g. in-doubt calls);
- ``step_limit``: ``max_steps`` model calls were made without a final response;
- ``stale``: another writer answered calls this invocation ran before it could (its answers
  were dropped, the first answer wins); it appended nothing more, and the newer writer's
  invocation carries the session on.
- ``escalated``: a tool set ``escalate`` (``ToolContext.actions.escalate``); the invocation ends
  after that step's responses, with the tool and its reason in ``pause_reason``.
"""


def new_invocation_id() -> str:
    """Return a fresh invocation id, ``inv-<uuid4 hex>``."""
    return f"inv-{uuid.uuid4().hex}"


@dataclass(frozen=True, kw_only=True)
class PlannedCall:
    """A function call to execute, with the human's answer when it is a confirmed re-run."""

    call: FunctionCall
    """The call, with its original id, name and args."""
    confirmation: ToolConfirmation | None = None
    """Set as ``ToolContext.tool_confirmation``: confirmed runs the tool, rejected answers with a
    ``confirmation_rejected`` error; ``None`` runs the call normally."""


@dataclass(frozen=True, kw_only=True)
class ResumePlan:
    """What to do before the first model call of an invocation.

    ``calls`` run first, through the same claim → run → merge → append path as the model's calls;
    then, if ``pause_reason`` is set, the invocation stops with status ``paused_by_planner``
    instead of calling the model.
    """

    calls: tuple[PlannedCall, ...] = ()
    """Calls to execute now, in this order."""
    pause_reason: str | None = None
    """Why the invocation must not call the model (e.g. in-doubt calls wait for a decision)."""


NOTHING_TO_RESUME = ResumePlan()


@runtime_checkable
class ResumePlanner(Protocol):
    """Decides from the log what an invocation must do before calling the model.

    Must be a pure function of the events (and its configuration): the same log gives the same
    plan. ``events_newest_first`` yields the session's events up to ``ctx.version``, newest first,
    read lazily so the planner can stop early.
    """

    async def plan(
        self, ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
    ) -> ResumePlan:
        """Return the plan for this invocation."""
        ...


class NoResumePlanner:
    """The default planner: there is never anything to resume."""

    async def plan(
        self, ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
    ) -> ResumePlan:
        """Return the empty plan without reading any event."""
        return NOTHING_TO_RESUME


@runtime_checkable
class LoopRequestProcessor(Protocol):
    """One stage of building the model request from the log; stages run in order.

    Must be a pure function of ``ctx``'s events, state and configuration (replay determinism).
    """

    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        """Edit ``request`` in place."""
        ...


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """The outcome of one invocation.

    Guarantees: ``events`` are exactly the events this invocation appended, in log order, with
    ``seq`` set; ``version`` is the session's version after the last of them.
    """

    invocation_id: str
    """Id shared by every event of the invocation."""
    status: RunStatus
    """How the invocation ended."""
    events: tuple[Event, ...]
    """Events appended by this invocation, oldest first."""
    final_text: str
    """Text of the final response (empty when the invocation paused)."""
    version: int
    """Session version after this invocation."""
    pending_call_ids: tuple[str, ...] = ()
    """Calls (or confirmation requests) left waiting for a response; when paused for
    confirmation, the ids ``answer_confirmation`` accepts on this session (an ``AgentTool``
    child's included)."""
    pause_reason: str | None = None
    """Why it paused or stopped, in a sentence (``None`` when completed)."""


class InvocationContext:
    """Everything one invocation of one agent on one session sees.

    Guarantees: ``version`` is the ``seq`` of the newest event this invocation read or wrote;
    ``append`` writes with ``expected_version=version`` and raises ``SessionConflictError`` when
    another writer moved the session (nothing is written then); ``events()`` is the session's
    log up to ``version`` — a cache of the log, never a second source of truth.
    """

    def __init__(
        self,
        *,
        store: EventStore,
        session_id: str,
        app_name: str,
        user_id: str,
        agent: InvocationAgent,
        version: int,
        invocation_id: str | None = None,
        branch: str | None = None,
        artifacts: ArtifactService | None = None,
        metadata: Mapping[str, Any] | None = None,
        observers: Sequence[ToolCallObserver] = (),
        append_observers: Sequence[AppendObserver] = (),
    ) -> None:
        self.store = store
        """The event store."""
        self.session_id = session_id
        """Id of the session."""
        self.app_name = app_name
        """Application the session belongs to."""
        self.user_id = user_id
        """User the session belongs to."""
        self.agent = agent
        """The agent being run."""
        self.invocation_id = invocation_id if invocation_id is not None else new_invocation_id()
        """Id of this invocation; set on every event it appends."""
        self.branch = branch
        """Agent path for nested agents (``None`` at the root)."""
        self.artifacts = artifacts
        """The session's artifact service, if any (handed to tool contexts)."""
        self.metadata: dict[str, Any] = dict(metadata) if metadata is not None else {}
        """The caller's side channel (trace ids …): model callbacks see it here, every
        ``ToolContext`` gets a copy; it never reaches a model request or the log."""
        self.version = version
        """``seq`` of the newest event this invocation has seen."""
        self.observers: tuple[ToolCallObserver, ...] = tuple(observers)
        """Tracing hooks around every call this invocation executes (the runner's), called
        before the plugins' own observer hooks."""
        self.append_observers: tuple[AppendObserver, ...] = tuple(append_observers)
        """Called after each append with the stored events (the plugins that override
        ``after_append``, in plugin order; the runner chooses them)."""
        self.appended: list[Event] = []
        """Events appended by this invocation, oldest first."""
        self.step = 0
        """Number of model calls made so far in this invocation."""
        self.event_sink: Callable[[Event], None] | None = None
        """Where tools' ``emit_event`` sends events for the caller's stream (set by the runner;
        those events are never appended)."""
        self._cache: list[Event] | None = None
        self._compacted: tuple[Event | None, list[Event]] | None = None
        self._readonly: tuple[int, ReadonlyContext] | None = None
        self._state: dict[str, Any] | None = None
        self._tools: dict[str, Tool] | None = None
        self._unreported = 0

    # -- the log -------------------------------------------------------------------------------

    def new_event(
        self,
        *,
        content: Content | None = None,
        actions: EventActions | None = None,
        author: str | None = None,
        **fields: Any,
    ) -> Event:
        """Return an event of this invocation (author = the agent unless given, branch, ids)."""
        return Event(
            author=author if author is not None else self.agent.name,
            invocation_id=self.invocation_id,
            branch=self.branch,
            content=content,
            actions=actions if actions is not None else EventActions(),
            **fields,
        )

    async def append(self, *events: Event) -> list[Event]:
        """Append ``events`` atomically at ``version`` and return them with ``seq`` set.

        Raises ``SessionConflictError`` when the session is no longer at ``version``.
        """
        try:
            stored = await self.store.append(self.session_id, events, expected_version=self.version,
                                             app_name=self.app_name, user_id=self.user_id)
        except ConcurrencyError as exc:
            raise SessionConflictError(
                session_id=self.session_id,
                invocation_id=self.invocation_id,
                expected_version=exc.expected_version,
                actual_version=exc.actual_version,
            ) from exc
        last = stored[-1].seq
        assert last is not None
        self.version = last
        self.appended.extend(stored)
        if self._cache is not None:
            self._cache.extend(stored)
        if self._compacted is not None:
            if any(e.actions.compaction is not None for e in stored):
                self._compacted = None  # read again from the new compaction
            else:
                self._compacted[1].extend(stored)
        if self._state is not None:
            for event in stored:
                apply_delta(self._state, event.actions.state_delta,
                            deleted=event.actions.state_deletions)
        for observer in self.append_observers:
            await observer.after_append(self, stored)
        return stored

    async def events(self) -> list[Event]:
        """Return the session's events up to ``version``, oldest first (read once, then cached)."""
        if self._cache is None:
            self._cache = await self.store.read(self.session_id, upto=self.version,
                                                app_name=self.app_name, user_id=self.user_id)
        return self._cache

    async def request_events(self) -> tuple[Event | None, list[Event]]:
        """Return the newest compaction event up to ``version`` (``None`` without one) and the
        events after its range, oldest first: what the model's request is built from. Read
        once (backwards, no further than the compaction: ``EventStore.read_compacted``), then
        kept up to date by ``append``."""
        if self._compacted is None:
            if self._cache is not None and not any(
                    e.actions.compaction is not None for e in self._cache):
                self._compacted = (None, list(self._cache))
            else:
                history = await self.store.read_compacted(
                    self.session_id, upto=self.version, app_name=self.app_name,
                    user_id=self.user_id)
                self._compacted = (history.compaction, list(history.events))
        return self._compacted

    def events_newest_first(self) -> AsyncIterator[Event]:
        """Yield the session's events up to ``version``, newest first.

        From the events already read when there are (no I/O), else from the store in lazily
        read pages, so that a scan that stops early reads little.
        """
        if self._cache is not None:
            return _newest_first(self._cache, len(self._cache))
        return self.store.iter_backwards(self.session_id, upto=self.version,
                                         app_name=self.app_name, user_id=self.user_id)

    async def refresh(self, *, upto: int | None = None) -> None:
        """Forget what was read and move ``version`` to ``upto`` (default: the session's head).

        Used after a conflict; pass ``upto`` = the newest event the caller has checked so that a
        later append conflicts again if anything newer arrived meanwhile.
        """
        self.version = upto if upto is not None else await self.store.version(
            self.session_id, app_name=self.app_name, user_id=self.user_id)
        self._cache = None
        self._compacted = None
        self._readonly = None
        self._state = None

    def take_unreported(self) -> list[Event]:
        """Return the appended events not returned by an earlier call (for live consumers)."""
        fresh = self.appended[self._unreported :]
        self._unreported = len(self.appended)
        return fresh

    # -- derived views -------------------------------------------------------------------------

    async def state(self) -> dict[str, Any]:
        """Return the session state at ``version`` (a copy; the fold of the log).

        Read from the store once, then advanced by the deltas of the events this invocation
        appends (the same fold rule), so a step costs no state read. ``user:``/``app:`` keys
        changed by *other* sessions during the invocation show up in the next invocation.
        """
        if self._state is None:
            self._state = await self.store.state(self.session_id, at=self.version,
                                                 app_name=self.app_name, user_id=self.user_id)
        return dict(self._state)

    async def readonly_context(self) -> ReadonlyContext:
        """Return the read-only context request building and toolsets see (state at ``version``)."""
        if self._readonly is None or self._readonly[0] != self.version:
            readonly = ReadonlyContext(
                invocation_id=self.invocation_id,
                agent_name=self.agent.name,
                session_id=self.session_id,
                state=await self.state(),
                artifacts=self.artifacts,
                metadata=self.metadata,
            )
            self._readonly = (self.version, readonly)
        return self._readonly[1]

    async def resolve_tools(self) -> dict[str, Tool]:
        """Return the agent's tools by name (explicit tools, then toolsets'), once per invocation.

        Used to run planned calls before any request was built; a duplicate name keeps the
        first (request packing reports duplicates as errors).
        """
        if self._tools is None:
            readonly = await self.readonly_context()
            tools: dict[str, Tool] = {}
            for tool in self.agent.tools:
                tools.setdefault(tool.name, tool)
            for toolset in self.agent.toolsets:
                for tool in await toolset.tools(readonly):
                    tools.setdefault(tool.name, tool)
            self._tools = tools
        return self._tools

    def remember_tools(self, tools: dict[str, Tool]) -> None:
        """Record the execution table of the request being built (used by ``resolve_tools``)."""
        self._tools = dict(tools)

    def __repr__(self) -> str:
        return (
            f"InvocationContext(session_id={self.session_id!r}, "
            f"invocation_id={self.invocation_id!r}, agent={self.agent.name!r}, "
            f"version={self.version})"
        )


async def _newest_first(events: list[Event], count: int) -> AsyncIterator[Event]:
    # ``count`` is fixed when the scan starts: events appended meanwhile are not part of it.
    for index in range(count - 1, -1, -1):
        yield events[index]
