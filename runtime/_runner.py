"""``Runner``: runs invocations of one agent against sessions of an event store.

One invocation: append the user message → ask the resume planner → loop { build the request from
the log → model call → append the model event → execute its calls → stop or go on }. Every
decision is made from the log and every effect is an appended event, so a new runner (in a new
process) continues any session from the database alone.

The rooms it is built from: ``_turn`` (a model turn as the log records it), ``_execute`` (claim
and run a step's calls), ``_ending`` (when and how an invocation stops), ``_event_stream`` (how
its events reach the caller), ``_live`` (the live loop), ``_artifact_service`` (the session's
artifacts over the store).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from eventstore import Content, Event, EventStore, Part, Session
from runtime._agent import Agent
from runtime._artifact_service import StoreArtifactService
from runtime._callbacks import run_model_callbacks
from runtime._compaction import compact_if_due
from runtime._ending import Ending, at_step_limit, settled, stopped
from runtime._event_stream import observed, with_emitted
from runtime._exceptions import RuntimeUsageError, SessionConflictError
from runtime._execute import claim_calls, run_claimed
from runtime._invocation import (
    InvocationContext,
    LoopRequestProcessor,
    ResumePlanner,
    RunResult,
)
from runtime._live import LiveStreams, drive_live
from runtime._model import ModelResponse, StreamingModel
from runtime._plugins import observing, plugin_model_callbacks
from runtime._processors import default_request_processors
from runtime._streaming import LiveToolStream
from runtime._turn import stream_turn, turn_event
from runtime.replay import LoadArtifactsProcessor, ReplayResumePlanner
from runtime.tools import ModelRequest, ToolCallObserver

__all__ = ["Runner"]

_PLAN_ATTEMPTS = 3


class Runner:
    """Runs one agent on sessions of one app in an ``EventStore``.

    Guarantees: every event it appends carries the invocation id, the agent's name as author
    (``user`` for the user's message) and the branch; every append is checked against the
    version the runner last saw. A session moved by another writer stops the invocation with
    ``SessionConflictError`` before anything is overwritten or any claimed call runs twice — with
    one exception: the answers of calls this invocation claimed and ran are facts, appended after
    the other writer's events (even its claim of the same call), leaving out only the calls
    those events already answered, so no call that ran is left unanswered and none is answered
    twice. A conflict
    on the resume planner's claim re-plans on the new head. The runner keeps no per-session
    state between invocations: by default every invocation first recovers what the log says is
    owed (answered confirmations, never-started or idempotent crashed calls) and pauses on calls
    in doubt.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        store: EventStore,
        app_name: str,
        request_processors: Sequence[LoopRequestProcessor] | None = None,
        resume_planner: ResumePlanner | None = None,
        branch: str | None = None,
        observers: Sequence[ToolCallObserver] = (),
        live: bool = False,
        live_wait: float | None = None,
    ) -> None:
        self.agent = agent
        """The agent this runner runs."""
        self.store = store
        """The event store."""
        self.app_name = app_name
        """The app whose sessions it runs."""
        self.request_processors: tuple[LoopRequestProcessor, ...] = tuple(
            request_processors
            if request_processors is not None
            else [*default_request_processors(), LoadArtifactsProcessor()]
        )
        """Request building stages, in order (default: instructions, contents, tools, then the
        contents of artifacts the model asked ``load_artifacts`` for)."""
        self.resume_planner: ResumePlanner = (
            resume_planner if resume_planner is not None else ReplayResumePlanner()
        )
        """Called once per invocation before the first model call (default: replay-based
        resume — confirmations, dedup, crash recovery; pass ``NoResumePlanner()`` to turn it
        off)."""
        self.branch = branch
        """Branch set on every event (``None`` for a root agent)."""
        self.observers: tuple[ToolCallObserver, ...] = tuple(observers)
        """Tracing hooks (started / completed / failed / validation-failed) around every call
        the runner executes; plugins' observer hooks run after these."""
        self.live = live
        """Live mode: streaming tools stream into the caller's event stream while the loop goes
        on, and the model can stop them (see ``runtime._live``)."""
        self.live_wait = live_wait
        """Live mode: how long the end of an invocation waits for streams still running before
        stopping them (``None``: until they end)."""

    async def __aenter__(self) -> Runner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close what the agent's toolsets and tools hold open (their ``aclose()``, e.g. the
        client session of an ``MCPToolset``); idempotent. ``async with Runner(...)`` calls it."""
        for owner in (*self.agent.toolsets, *self.agent.tools):
            close = getattr(owner, "aclose", None)
            if callable(close):
                await close()

    async def create_session(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session of this runner's app (see ``EventStore.create_session``)."""
        return await self.store.create_session(
            app_name=self.app_name, user_id=user_id, session_id=session_id, state=state
        )

    async def new_context(
        self,
        *,
        session_id: str,
        user_id: str,
        invocation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> InvocationContext:
        """Return a context for a new invocation at the session's current version.

        ``metadata`` is the invocation's side channel (see ``InvocationContext.metadata``).
        Raises ``SessionNotFoundError`` when the session does not exist or belongs to another app
        or user.
        """
        info = await self.store.session_info(session_id, app_name=self.app_name,
                                             user_id=user_id)
        return InvocationContext(
            store=self.store,
            session_id=session_id,
            app_name=self.app_name,
            user_id=user_id,
            agent=self.agent,
            version=info.version,
            invocation_id=invocation_id,
            branch=self.branch,
            artifacts=StoreArtifactService(self.store, session_id, app_name=self.app_name,
                                           user_id=user_id),
            metadata=metadata,
            observers=self.observers,
            append_observers=observing(self.agent.plugins, "after_append"),
        )

    async def build_request(self, ctx: InvocationContext) -> ModelRequest:
        """Run the request processors in order on a new request and return it (no I/O but reads)."""
        request = ModelRequest()
        for processor in self.request_processors:
            await processor.process(ctx, request)
        return request

    async def run(
        self,
        *,
        session_id: str,
        user_id: str,
        new_message: str | Content | None = None,
        invocation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> RunResult:
        """Run one invocation to its end and return what it appended and how it ended.

        ``new_message`` (text or a user ``Content`` — e.g. a confirmation answer or a
        long-running result) is appended first; ``None`` resumes from the log alone.
        ``metadata`` (trace ids and the like) reaches model callbacks (``ctx.metadata``) and a
        copy of it every ``ToolContext``, never a model request nor the log. ``on_event`` sees
        every event ``run_events`` would yield, as it comes. Cancelling the task
        that awaits ``run`` sets the ``cancel_event`` of every running call. Raises
        ``SessionConflictError``, ``SessionNotFoundError``, and whatever the model raises.
        """
        ctx = await self.new_context(
            session_id=session_id, user_id=user_id, invocation_id=invocation_id, metadata=metadata
        )
        ending = Ending()
        async for event in self._invocation(ctx, new_message, ending):
            if on_event is not None:
                on_event(event)
        return self._result(ctx, ending)

    async def run_events(
        self,
        *,
        session_id: str,
        user_id: str,
        new_message: str | Content | None = None,
        invocation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        stream_text: bool = False,
    ) -> AsyncIterator[Event]:
        """Run one invocation, yielding each event right after it was appended (with ``seq``).

        Stopping the iteration early stops the invocation between two appends; what was appended
        stays, and the next run continues from the log. ``metadata`` as for ``run``.
        With ``stream_text`` and a ``StreamingModel``, each model turn's text is also yielded as
        it arrives, as ``partial=True`` events (no ``seq``) that are never stored; the stored
        turn follows them, its text their concatenation. Stopping during a stream stores
        nothing of that turn. In live mode it also yields live tool chunks as they arrive:
        partial events, never stored.
        """
        ctx = await self.new_context(
            session_id=session_id, user_id=user_id, invocation_id=invocation_id, metadata=metadata
        )
        # aclosing: a consumer that stops early closes the invocation now, not at garbage
        # collection (live streams are stopped and their end logged right away).
        invocation = self._invocation(ctx, new_message, Ending(), stream_text=stream_text)
        async with contextlib.aclosing(invocation) as events:
            async for event in events:
                yield event

    async def live_tools(self, *, session_id: str, user_id: str) -> LiveToolStream:
        """Return a ``LiveToolStream`` over the agent's streaming tools for this session.

        Live chunks are yielded as produced and never stored; use ``async with`` so every stream
        is cancelled when the block ends.
        """
        ctx = await self.new_context(session_id=session_id, user_id=user_id)
        return LiveToolStream(
            tools=await ctx.resolve_tools(),
            session_id=session_id,
            agent_name=self.agent.name,
            invocation_id=ctx.invocation_id,
            state=await ctx.state(),
            artifacts=ctx.artifacts,
            app_name=self.app_name,
            user_id=user_id,
        )

    # -- the loop ------------------------------------------------------------------------------

    async def _fresh_pause_reason(self, ctx: InvocationContext) -> str:
        fresh = await self.resume_planner.plan(ctx, ctx.events_newest_first())
        if fresh.pause_reason is not None:
            return fresh.pause_reason
        return (
            f"Invocation {ctx.invocation_id!r} paused on calls in doubt, but another writer "
            f"settled them while it ran the planned calls (session {ctx.session_id!r} is at seq "
            f"{ctx.version}); nothing is in doubt now: run the session again to continue."
        )

    @staticmethod
    def _result(ctx: InvocationContext, ending: Ending) -> RunResult:
        return RunResult(
            invocation_id=ctx.invocation_id,
            status=ending.status,
            events=tuple(ctx.appended),
            final_text=ending.final_text,
            version=ctx.version,
            pending_call_ids=ending.pending,
            pause_reason=ending.reason,
        )

    def _invocation(
        self,
        ctx: InvocationContext,
        new_message: str | Content | None,
        ending: Ending,
        *,
        stream_text: bool = False,
    ) -> AsyncGenerator[Event, None]:
        if not self.live:
            return observed(ctx, self.agent.plugins, with_emitted(
                ctx, self._drive(ctx, new_message, ending, stream_text=stream_text)
            ))
        return observed(ctx, self.agent.plugins, drive_live(
            ctx,
            lambda live: self._drive(ctx, new_message, ending, live, stream_text=stream_text),
            model=self.agent.model,
            wait=self.live_wait,
        ))

    async def _drive(
        self,
        ctx: InvocationContext,
        new_message: str | Content | None,
        ending: Ending,
        live: LiveStreams | None = None,
        *,
        stream_text: bool = False,
    ) -> AsyncGenerator[Event, None]:
        if new_message is not None:
            await ctx.append(ctx.new_event(author="user", content=_user_content(new_message)))
            for event in ctx.take_unreported():
                yield event

        for attempt in range(_PLAN_ATTEMPTS):
            plan = await self.resume_planner.plan(ctx, ctx.events_newest_first())
            if not plan.calls:
                break
            try:
                claimed = await claim_calls(ctx, plan.calls)
            except SessionConflictError:
                # Another writer moved the session between planning and claiming; its events
                # (maybe its own claim) are in the log now, so planning again on the new head
                # never runs a call twice.
                if attempt == _PLAN_ATTEMPTS - 1:
                    raise
                await ctx.refresh()
                continue
            for event in ctx.take_unreported():
                yield event
            step = await run_claimed(ctx, claimed, live=live)
            for event in ctx.take_unreported():
                yield event
            if await stopped(ctx, step, ending):
                return
            if plan.pause_reason is not None:
                # The reason was read before the calls ran; another writer may have settled the
                # calls it names meanwhile (the answers then went past its events), so say what
                # the log says now. Nothing more runs in this invocation either way.
                ending.status = "paused_by_planner"
                ending.reason = await self._fresh_pause_reason(ctx)
                return
            break
        if plan.pause_reason is not None:
            ending.status, ending.reason = "paused_by_planner", plan.pause_reason
            return
        # The head decides whatever brought the new events (a run's message or an answer
        # API): a message with text gives the model a turn, answers to part of a turn do not.
        if await settled(ctx, ending):
            return

        before, after = plugin_model_callbacks(self.agent.plugins)
        before += self.agent.callbacks.before_model
        after += self.agent.callbacks.after_model
        while True:
            if at_step_limit(ctx, ending):
                return
            request = await self.build_request(ctx)
            if live is not None:
                live.process_request(request)
            response = await run_model_callbacks(before, ctx, request)
            if response is None:
                model = self.agent.model
                if stream_text and isinstance(model, StreamingModel):
                    streamed: list[ModelResponse] = []
                    async for partial in stream_turn(ctx, model, request, streamed):
                        yield partial
                    response = streamed[0]
                else:
                    response = await model.generate(request)
            response = await run_model_callbacks(after, ctx, response) or response
            ctx.step += 1
            response, turn = await turn_event(ctx, request, response)
            await ctx.append(turn)
            for event in ctx.take_unreported():
                yield event
            if not response.function_calls:
                ending.final_text = response.text
                if await compact_if_due(ctx):
                    for event in ctx.take_unreported():
                        yield event
                return

            claimed = await claim_calls(ctx, response.function_calls)
            for event in ctx.take_unreported():
                yield event
            step = await run_claimed(ctx, claimed, tools=request.tools_by_name, live=live)
            for event in ctx.take_unreported():
                yield event
            if await stopped(ctx, step, ending):
                return


def _user_content(message: str | Content) -> Content:
    if isinstance(message, str):
        return Content(role="user", parts=(Part(text=message),))
    if message.role != "user":
        raise RuntimeUsageError(
            f"A new message must have role 'user', not {message.role!r}; model turns are "
            f"appended by the runner."
        )
    return message
