"""Executing the function calls of one step: claim → run (concurrently) → merge → append.

The same path serves the model's calls and the calls a resume planner asks for (with the human's
confirmation per call), so both write the same shapes (``docs/protocol.md`` §3-§5).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    FunctionCall,
    Part,
    apply_delta,
    claim_event,
)
from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError, SessionConflictError
from runtime._invocation import InvocationContext, PlannedCall
from runtime._live import LiveStreams
from runtime._merge import MergedResponses, merge_outcomes
from runtime._plugins import plugin_tool_callbacks
from runtime.tools import (
    CallOutcome,
    SkipSummarizationResultDisplayer,
    StreamingTool,
    Tool,
    ToolCallObserver,
    execute_function_call,
)

__all__ = [
    "ClaimedCalls",
    "StepExecution",
    "claim_calls",
    "confirmation_request_event",
    "execute_calls",
    "run_claimed",
]


@dataclass(frozen=True, kw_only=True)
class StepExecution:
    """What executing one step's calls did.

    Guarantees: ``events`` were appended in this order — the claim, then (when anything was
    answered or any action recorded) the one response event, then the confirmation-request event
    when confirmations were requested, then a display-text event when a skip-summarization result
    was shown.
    """

    outcomes: tuple[CallOutcome, ...]
    """The pipeline's outcome of each call, in call order."""
    events: tuple[Event, ...]
    """Events appended, in log order."""
    pending_call_ids: tuple[str, ...]
    """Calls with no response yet (long-running or deferred), in call order."""
    confirmation_call_ids: tuple[str, ...]
    """Ids of the confirmation-request calls appended (empty when none was requested)."""
    skip_summarization: bool
    """Some call asked not to call the model again for this step."""
    display_text: str
    """Visible text produced by ``SkipSummarizationResultDisplayer`` tools (may be empty)."""
    dropped_call_ids: tuple[str, ...] = ()
    """Calls whose outcome was not appended because another writer answered them first: this
    invocation is stale and must append nothing more."""
    escalated: bool = False
    """Some answered call set ``escalate``: the invocation ends after this step."""


def _as_planned(call: PlannedCall | FunctionCall) -> PlannedCall:
    return call if isinstance(call, PlannedCall) else PlannedCall(call=call)


@dataclass(frozen=True, kw_only=True)
class ClaimedCalls:
    """Calls whose execution-started event is in the log (docs/protocol.md §3); run them next."""

    calls: tuple[PlannedCall, ...]
    """The claimed calls, in order."""
    claim: Event | None
    """The stored claim event (``None`` when there was nothing to claim)."""


async def claim_calls(
    ctx: InvocationContext, calls: Sequence[PlannedCall | FunctionCall]
) -> ClaimedCalls:
    """Append the execution-started event for ``calls`` with ``expected_version``.

    Carries ``started_call_ids``, each call's idempotency key and who claims them when
    (``custom_metadata["claimed_by"]``: ``invocation_id``, ``host``, ``pid``, wall-clock ``at``
    in seconds since the epoch), so a human can tell a crashed claim from a live one. Raises
    ``SessionConflictError`` when another writer moved the session: then nothing was claimed and
    no tool may run.
    """
    planned = tuple(_as_planned(c) for c in calls)
    if not planned:
        return ClaimedCalls(calls=(), claim=None)
    claim = claim_event(
        session_id=ctx.session_id,
        call_ids=[p.call.id for p in planned],
        author=ctx.agent.name,
        invocation_id=ctx.invocation_id,
        branch=ctx.branch,
    )
    (stored,) = await ctx.append(claim)
    return ClaimedCalls(calls=planned, claim=stored)


async def execute_calls(
    ctx: InvocationContext,
    calls: Sequence[PlannedCall | FunctionCall],
    *,
    tools: Mapping[str, Tool] | None = None,
    parallel: bool | None = None,
) -> StepExecution:
    """Claim, run and answer ``calls``: ``claim_calls`` then ``run_claimed``.

    Responses are merged in the order of ``calls`` whatever order the tools finish in.
    """
    claimed = await claim_calls(ctx, calls)
    return await run_claimed(ctx, claimed, tools=tools, parallel=parallel)


async def run_claimed(
    ctx: InvocationContext,
    claimed: ClaimedCalls,
    *,
    tools: Mapping[str, Tool] | None = None,
    parallel: bool | None = None,
    live: LiveStreams | None = None,
) -> StepExecution:
    """Run claimed calls through the tool pipeline and append what they produced.

    With ``live``, a call of a streaming tool starts a live stream there and is answered at
    once with its pending response, without the tool callbacks (see ``runtime._live``).

    ``tools`` is the execution table (the request's, or ``ctx.resolve_tools()`` when omitted);
    ``parallel`` defaults to the agent's ``parallel_tool_calls``. Each call's ``ToolContext``
    gets the planned confirmation, the idempotency key of (session, call id), a copy of
    ``ctx.metadata`` and its own cancel event, set when the task running the calls is cancelled.
    Appends, in one atomic batch: the response event, the confirmation-request event, the
    display-text event.
    If another writer appended while the tools ran, the batch goes after its events, without the
    outcome of any call those events answered (a call is answered once; see ``_append_answers``).
    """
    planned = list(claimed.calls)
    appended: list[Event] = [claimed.claim] if claimed.claim is not None else []
    if not planned:
        return StepExecution(
            outcomes=(),
            events=tuple(appended),
            pending_call_ids=(),
            confirmation_call_ids=(),
            skip_summarization=False,
            display_text="",
        )
    table = tools if tools is not None else await ctx.resolve_tools()
    run_parallel = ctx.agent.parallel_tool_calls if parallel is None else parallel

    head = await ctx.state()
    plugin_layer = plugin_tool_callbacks(ctx.agent.plugins)
    agent_layer = ctx.agent.callbacks.tool_callbacks()

    cancel_events = [asyncio.Event() for _ in planned]
    watchers = [*ctx.observers, *ctx.agent.plugins]
    observer = _Observers(watchers) if watchers else None

    async def run_one(index: int, state: Mapping[str, Any]) -> CallOutcome:
        item = planned[index]
        tool_ctx = ToolContext(
            function_call_id=item.call.id,
            invocation_id=ctx.invocation_id,
            agent_name=ctx.agent.name,
            session_id=ctx.session_id,
            app_name=ctx.app_name,
            user_id=ctx.user_id,
            state=state,
            artifacts=ctx.artifacts,
            cancel_event=cancel_events[index],
            tool_confirmation=item.confirmation,
            metadata=dict(ctx.metadata),
            event_sink=ctx.event_sink,
        )
        tool = table.get(item.call.name)
        if live is not None and isinstance(tool, StreamingTool) and item.confirmation is None:
            return live.start(item.call, tool, tool_ctx)
        return await execute_function_call(
            item.call,
            tools=table,
            ctx=tool_ctx,
            plugin_callbacks=plugin_layer,
            agent_callbacks=agent_layer,
            observer=observer,
        )

    async def run_all() -> list[CallOutcome]:
        if run_parallel and len(planned) > 1:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(run_one(i, head)) for i in range(len(planned))]
            return [task.result() for task in tasks]
        done: list[CallOutcome] = []
        state = dict(head)
        for i in range(len(planned)):
            # Sequential calls see the state their predecessors wrote, as they would one by one.
            outcome = await run_one(i, state)
            apply_delta(state, outcome.actions.state_delta,
                        deleted=outcome.actions.state_deletions)
            done.append(outcome)
        return done

    work = asyncio.ensure_future(run_all())
    try:
        # Shielded so that on cancellation the events are set before the tools see the
        # CancelledError: a tool cleaning up reads ``ctx.cancelled`` as True, and a sync tool in
        # a worker thread, which asyncio cannot interrupt, can stop by polling it.
        outcomes = await asyncio.shield(work)
    except asyncio.CancelledError:
        for event in cancel_events:
            event.set()
        work.cancel()
        await asyncio.wait([work])
        raise

    answers = await _append_answers(ctx, planned, outcomes, table)
    appended.extend(answers.events)
    return StepExecution(
        outcomes=tuple(outcomes),
        events=tuple(appended),
        pending_call_ids=answers.merged.pending_call_ids,
        confirmation_call_ids=answers.confirmation_call_ids,
        skip_summarization=answers.merged.actions.skip_summarization,
        display_text=answers.display,
        dropped_call_ids=answers.dropped,
        escalated=answers.merged.actions.escalate,
    )


class _Observers(ToolCallObserver):
    """Fans each hook out to the runner's observers, then the plugins, in order."""

    def __init__(self, observers: Sequence[ToolCallObserver]) -> None:
        self._observers = tuple(observers)

    def on_call_starting(self, call: FunctionCall, ctx: ToolContext) -> None:
        for observer in self._observers:
            observer.on_call_starting(call, ctx)

    def on_call_completed(self, call: FunctionCall, outcome: CallOutcome) -> None:
        for observer in self._observers:
            observer.on_call_completed(call, outcome)

    def on_call_failed(
        self, call: FunctionCall, outcome: CallOutcome, error: BaseException | None
    ) -> None:
        for observer in self._observers:
            observer.on_call_failed(call, outcome, error)

    def on_validation_failed(self, call: FunctionCall, error: InvalidToolArgumentsError) -> None:
        for observer in self._observers:
            observer.on_validation_failed(call, error)


@dataclass(frozen=True, kw_only=True)
class _Answers:
    """The answer batch of one step, built from the outcomes not answered by another writer."""

    batch: tuple[Event, ...]
    merged: MergedResponses
    confirmation_call_ids: tuple[str, ...]
    display: str
    events: tuple[Event, ...] = ()
    dropped: tuple[str, ...] = ()


def _answers(
    ctx: InvocationContext,
    planned: Sequence[PlannedCall],
    outcomes: Sequence[CallOutcome],
    table: Mapping[str, Tool],
) -> _Answers:
    """Build the response event, the confirmation-request event and the display-text event."""
    merged = merge_outcomes(outcomes)
    batch: list[Event] = []
    if merged.responses or not merged.actions.is_empty():
        batch.append(ctx.new_event(content=merged.content(), actions=merged.actions))
    kept = {o.call_id for o in outcomes}
    confirmation = confirmation_request_event(
        ctx, [p.call for p in planned if p.call.id in kept], outcomes
    )
    if confirmation is not None:
        batch.append(confirmation)
    display = "" if confirmation is not None else _display_text(table, outcomes, merged)
    if display:
        batch.append(
            ctx.new_event(
                content=Content(role="model", parts=(Part(text=display),)), turn_complete=True
            )
        )
    return _Answers(
        batch=tuple(batch),
        merged=merged,
        confirmation_call_ids=tuple(confirmation.long_running_tool_ids) if confirmation else (),
        display=display,
    )


_ANSWER_ATTEMPTS = 32
"""Re-reads before giving up on recording answers; each conflict means another writer's append
succeeded, so this only runs out when the session is flooded with writes."""


async def _append_answers(
    ctx: InvocationContext,
    planned: Sequence[PlannedCall],
    outcomes: Sequence[CallOutcome],
    table: Mapping[str, Tool],
) -> _Answers:
    """Append what the claimed calls produced, even if the session moved while they ran.

    The tools already ran, so their results are facts to record, not decisions to re-make. When
    another writer appended meanwhile (a user message, another process's claim of one of these
    calls — an idempotent re-run by a process that took this one for crashed — or its answer),
    re-read what it appended and append at the new head, leaving out the outcome of every call
    the log now answers: a call is answered once, the first answer wins, and a duplicate is never
    appended. Another writer's *claim* changes nothing: dropping this invocation's answer because
    of it would leave a call that ran with no response (in doubt forever).

    The append that succeeds is made at the version the check read, so no answer can land
    between the check and the append. Raises ``SessionConflictError`` only after
    ``_ANSWER_ATTEMPTS`` consecutive conflicts.
    """
    answered: set[str] = set()
    for attempt in range(_ANSWER_ATTEMPTS):
        kept = [o for o in outcomes if o.call_id not in answered]
        dropped = tuple(o.call_id for o in outcomes if o.call_id in answered)
        answers = dataclasses.replace(_answers(ctx, planned, kept, table), dropped=dropped)
        if not answers.batch:
            return answers
        try:
            stored = await ctx.append(*answers.batch)
        except SessionConflictError:
            if attempt == _ANSWER_ATTEMPTS - 1:
                raise
            newer = await ctx.store.read(ctx.session_id, after=ctx.version, app_name=ctx.app_name,
                                         user_id=ctx.user_id)
            for event in newer:
                answered.update(r.id for r in event.function_responses())
            # Move exactly to what was checked: an event newer than that conflicts again.
            await ctx.refresh(upto=newer[-1].seq if newer else None)
            continue
        return dataclasses.replace(answers, events=tuple(stored))
    raise AssertionError("unreachable")


def confirmation_request_event(
    ctx: InvocationContext, calls: Sequence[FunctionCall], outcomes: Sequence[CallOutcome]
) -> Event | None:
    """Return the confirmation-request event for the outcomes that requested one, or ``None``.

    One ``REQUEST_CONFIRMATION_FUNCTION`` call per requested confirmation, in call order, each with
    a new ``confirm-…`` id, the original call (id, name, the model's args) and the requested
    confirmation; the new ids are the event's ``long_running_tool_ids`` (docs/protocol.md §5).
    """
    by_id = {call.id: call for call in calls}
    parts: list[Part] = []
    ids: list[str] = []
    for outcome in outcomes:
        for call_id, requested in outcome.actions.requested_tool_confirmations.items():
            original = by_id.get(call_id)
            if original is None:
                continue
            confirm_id = f"confirm-{uuid.uuid4().hex}"
            ids.append(confirm_id)
            parts.append(
                Part(
                    function_call=FunctionCall(
                        id=confirm_id,
                        name=REQUEST_CONFIRMATION_FUNCTION,
                        args={
                            "originalFunctionCall": {
                                "id": original.id,
                                "name": original.name,
                                "args": dict(original.args),
                            },
                            "toolConfirmation": {
                                "hint": requested.hint,
                                "confirmed": False,
                                "payload": requested.payload,
                            },
                        },
                    )
                )
            )
    if not parts:
        return None
    return ctx.new_event(
        content=Content(role="model", parts=tuple(parts)), long_running_tool_ids=tuple(ids)
    )


def _display_text(
    tools: Mapping[str, Tool], outcomes: Sequence[CallOutcome], merged: MergedResponses
) -> str:
    if not merged.actions.skip_summarization:
        return ""
    texts: list[str] = []
    for outcome in outcomes:
        tool = tools.get(outcome.tool_name)
        if (
            outcome.actions.skip_summarization
            and outcome.error_kind is None
            and outcome.response is not None
            and isinstance(tool, SkipSummarizationResultDisplayer)
        ):
            shown = tool.display_result(outcome.response)
            if shown:
                texts.append(shown)
    return "\n".join(texts)
