"""Agents as tools (``Agent.as_tool``) inside a durable run: each nested run is a durable run
of its own, in a child session linked to the parent's call, as the runtime's ``AgentTool``
children are (docs/protocol.md §10).

- The agent tool's ``on_invoke_tool`` is wrapped like any function tool's: a recorded output
  is returned without running it, and the call is claimed in the parent before it runs. A
  call claimed without an output is continued, never in doubt: running it again continues
  its child session from the log (its own calls run at most once), as ``AgentTool`` is
  idempotent.
- The SDK's agent tool starts its nested run with ``Runner.run(agent, …)``. While the
  wrapped call runs, ``ChildRunRouter`` (the SDK's default agent runner, installed once and
  passing every other run through unchanged) sends that run, and only it, to
  ``EventStoreRunner`` on the child session ``child_session_id(parent, call id in the log)``,
  whose first event links it to the parent call. So ``evs show`` and ``evs web`` show it under
  the call, and the child's model responses and tool calls are recorded and resumed as the
  parent's are.
- A nested run that stops for approvals leaves the parent's call open (no output); the SDK
  stops the parent too, and the stop of each is recorded in its own log: the confirmation
  request in the child, the parent's ``RunState`` in the parent. ``evs pending PARENT``
  lists the child's request and ``evs confirm PARENT ID`` answers it in the child; the
  parent's next run applies the answers found in its open calls' children
  (``child_decisions``) to its ``RunState``, and the SDK continues the nested run.
- A nested run stopped by a call in doubt, or by another process's run, stops the parent
  with the same error (the SDK's agent tool would have turned it into a tool output).

A nested run the router does not take (one given a session or a server-managed
conversation of its own, or a streamed one given a ``RunState``) runs as the SDK runs it,
its agent tool's call recorded as one call.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from agents import RunState
from agents.agent_tool_state import (
    drop_agent_tool_run_result,
    get_agent_tool_resume_state,
    get_agent_tool_state_scope,
    peek_agent_tool_run_result,
    record_agent_tool_run_result,
)
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from agents.tool import FunctionTool

from eventstore import EventStore, SessionNotFoundError, child_session_id

from .durable import CallInDoubtError, ConcurrentRunError, DurableRun
from .records import RunRecord
from .session import EventStoreSession

__all__ = ["ChildRun", "ChildRunRouter", "child_decisions", "is_agent_tool", "wrap_agent_tool"]

MAX_DEPTH = 8
"""How many levels of agent tools ``child_decisions`` follows below a session."""

_STOPS = (CallInDoubtError, ConcurrentRunError)
"""Errors of a nested run that stop the parent run (not a tool output for its model)."""


@dataclasses.dataclass(kw_only=True)
class ChildRun:
    """The nested run one agent tool call is about to start, and how it went."""

    session: EventStoreSession
    """The child session."""
    agent: Any
    """The agent the SDK's agent tool runs (``FunctionTool._agent_instance``)."""
    link: dict[str, Any]
    """The link event's ``PARENT_LINK_KEY`` value."""
    runner: Any
    """``EventStoreRunner``."""
    options: dict[str, Any]
    """``idempotent_tools`` and ``run_config`` (the caller's, for a nested run given the
    parent's) for the nested run."""
    parent_config: Any
    """The ``RunConfig`` the parent's SDK run was given (a nested run given it gets the
    caller's instead)."""
    result: Any = None
    """The nested run's result, once the router ran it."""
    stopped: BaseException | None = None
    """The error that stopped the nested run (one of ``_STOPS``)."""


_CHILD: contextvars.ContextVar[ChildRun | None] = contextvars.ContextVar(
    "eventstore_openai_agents_child_run", default=None)
"""Set while an agent tool call of a durable run runs: the nested run it starts."""


def _taken(child: ChildRun | None, agent: Any, options: Mapping[str, Any]) -> ChildRun | None:
    if child is None or agent is not child.agent or options.get("session") is not None \
            or options.get("conversation_id") or options.get("previous_response_id") \
            or options.get("auto_previous_response_id"):
        return None
    return child


class ChildRunRouter(AgentRunner):
    """The SDK's default agent runner while durable runs use agent tools: a nested run an
    agent tool starts inside a durable run (``ChildRun``) goes to ``EventStoreRunner`` on the
    child session; every other run goes to the runner it replaced, unchanged."""

    def __init__(self, inner: AgentRunner) -> None:
        self.inner = inner

    def _options(self, child: ChildRun, options: dict[str, Any]) -> dict[str, Any]:
        given = {k: v for k, v in options.items() if k not in (
            "session", "conversation_id", "previous_response_id", "auto_previous_response_id")}
        if given.get("run_config") is child.parent_config:
            given["run_config"] = child.options.get("run_config")
        return {**given, "idempotent_tools": child.options.get("idempotent_tools", ())}

    async def run(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        """The nested run of the current agent tool call, durable; any other run as before."""
        child = _taken(_CHILD.get(), starting_agent, options)
        if child is None:
            return await self.inner.run(starting_agent, input, **options)
        token = _CHILD.set(None)  # the child's own agent tools set theirs
        try:
            child.result = await child.runner._run_child(
                starting_agent, input, session=child.session, link=child.link,
                **self._options(child, options))
        except _STOPS as exc:
            child.stopped = exc
            raise
        finally:
            _CHILD.reset(token)
        return child.result

    def run_sync(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        """As the replaced runner's (an agent tool never runs its agent synchronously)."""
        return self.inner.run_sync(starting_agent, input, **options)

    def run_streamed(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        """The nested run of the current agent tool call (``on_stream``), durable unless it
        continues from a ``RunState``; any other run as before."""
        child = _taken(_CHILD.get(), starting_agent, options)
        if child is None or isinstance(input, RunState):
            return self.inner.run_streamed(starting_agent, input, **options)
        token = _CHILD.set(None)
        try:
            result = child.runner._run_child_streamed(
                starting_agent, input, session=child.session, link=child.link,
                **self._options(child, options))
        finally:
            _CHILD.reset(token)
        events = result.stream_events

        async def watched() -> Any:
            try:
                async for event in events():
                    yield event
            except _STOPS as exc:
                child.stopped = exc
                raise

        result.stream_events = watched
        child.result = result
        return result


def _install_router() -> None:
    current = get_default_agent_runner()
    if not isinstance(current, ChildRunRouter):
        set_default_agent_runner(ChildRunRouter(current))


def is_agent_tool(tool: Any) -> bool:
    """Whether ``tool`` is a ``FunctionTool`` made by ``Agent.as_tool``."""
    return isinstance(tool, FunctionTool) and bool(getattr(tool, "_is_agent_tool", False)) \
        and getattr(tool, "_agent_instance", None) is not None


def wrap_agent_tool(tool: FunctionTool, *, get_run: Callable[[], Any], author: str,
                    runner: Any, options: dict[str, Any], parent_config: Any,
                    settled: Callable[[Any], Any]) -> FunctionTool:
    """``tool`` (an agent tool) recording its call in the parent and its nested run in the
    call's child session (see the module). ``settled`` returns (or raises) a settled call's
    recorded outcome."""
    original = tool.on_invoke_tool
    _install_router()

    async def invoke(context: Any, raw: str) -> Any:
        run: DurableRun = await get_run()
        sdk_id = str(getattr(context, "tool_call_id", "") or "")
        call_id = run.calls.get(sdk_id, sdk_id)
        record = run.record.ledger.get(call_id)
        if record.decision(idempotent=True) == "settled":
            _forget_nested_stop(context)
            return settled(record)
        await run.claim(call_id, sdk_id, author=author)
        _install_router()  # again: something may have replaced the default runner since
        child = ChildRun(
            session=run.session._sibling(child_session_id(run.session.session_id, call_id)),
            agent=tool._agent_instance, runner=runner, options=options,
            parent_config=parent_config,
            link={"session_id": run.session.session_id, "function_call_id": call_id,
                  "agent": author, "invocation_id": run.record.run_id})
        token = _CHILD.set(child)
        try:
            value = await original(context, raw)
        except Exception as exc:
            if child.stopped is not None:
                raise child.stopped from None
            await run.record_output(call_id, sdk_id, tool=tool.name, author=author, response={
                "error": {"kind": "execution_failed", "tool": tool.name, "message": str(exc)}})
            raise
        finally:
            _CHILD.reset(token)
        if child.stopped is not None:
            raise child.stopped  # the SDK's agent tool made it an output; the run stops
        if await _child_stopped(child):
            return value  # the call stays open; the parent stops with the child
        _completed_resume(context, child.result)
        await run.record_output(call_id, sdk_id, tool=tool.name, author=author,
                                response=run.output_response(value))
        return value

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def _forget_nested_stop(context: Any) -> None:
    """For a call settled in the log: a ``RunState`` of a stop before it (loaded by a run
    resumed after it) still holds the call's nested run as stopped, which the SDK would stop
    at again; the call's output is what counts, so that nested run is dropped."""
    tool_call = getattr(context, "tool_call", None)
    if tool_call is not None:
        drop_agent_tool_run_result(tool_call, scope_id=get_agent_tool_state_scope(context))


def _completed_resume(context: Any, result: Any) -> None:
    """After a nested run continued from the SDK's ``RunState`` completed: the SDK keeps that
    state as the call's pending nested run, and it continues it in place, so its pending
    approvals end with it; ours continued a copy (bound to the durable agents), so the
    completed result takes the state's place, as the SDK records a nested run's result."""
    tool_call = getattr(context, "tool_call", None)
    if result is None or tool_call is None:
        return
    scope = get_agent_tool_state_scope(context)
    if get_agent_tool_resume_state(peek_agent_tool_run_result(tool_call, scope_id=scope)) \
            is not None:
        record_agent_tool_run_result(tool_call, result, scope_id=scope)


async def _child_stopped(child: ChildRun) -> bool:
    """Whether the nested run stopped for approvals: its result says so, or (when the SDK
    answered the call from the nested run it keeps for a pending approval, without a new
    run) the child's newest run has not ended."""
    if child.result is not None:
        return bool(getattr(child.result, "interruptions", None))
    session = child.session

    async def job(store: EventStore) -> bool:
        record = await _newest_run(store, session.session_id, session._app_name,
                                   session._user_id)
        return record is not None and record.ended is None

    result: bool = await session._handle.run(job)
    return result


async def _newest_run(store: EventStore, session_id: str, app_name: str,
                      user_id: str) -> RunRecord | None:
    newer: list[Any] = []
    try:
        async for event in store.iter_backwards(session_id, app_name=app_name,
                                                user_id=user_id):
            record = RunRecord.starting(event)
            if record is not None:
                for later in reversed(newer):
                    record.feed(later)
                return record
            newer.append(event)
    except SessionNotFoundError:
        return None
    return None


async def child_decisions(run: DurableRun) -> dict[str, bool]:
    """SDK call id → the answer recorded in a child session (of the run's claimed calls,
    and their children, ``MAX_DEPTH`` levels down) to the confirmation its stop asks for.
    Settled calls count too: a stop recorded before one settled still names its nested
    approval, which its answer lets the SDK go past (the call's output is then returned)."""
    session = run.session
    open_calls = [call_id for call_id, record in run.record.ledger.records.items()
                  if record.claims]

    async def job(store: EventStore) -> dict[str, bool]:
        found: dict[str, bool] = {}
        await _decisions(store, session, session.session_id, open_calls, found, depth=0)
        return found

    result: dict[str, bool] = await session._handle.run(job)
    return result


async def _decisions(store: EventStore, session: EventStoreSession, parent: str,
                     calls: list[str], found: dict[str, bool], *, depth: int) -> None:
    if depth >= MAX_DEPTH:
        return
    for call_id in calls:
        child = child_session_id(parent, call_id)
        record = await _newest_run(store, child, session._app_name, session._user_id)
        if record is None:
            continue
        stop = record.interruption
        if stop is not None:
            for confirm_id, sdk_call_id in stop.calls.items():
                if confirm_id in record.answers:
                    found.setdefault(sdk_call_id, record.answers[confirm_id])
        deeper = [c for c, r in record.ledger.records.items() if r.claims]
        await _decisions(store, session, child, deeper, found, depth=depth + 1)
