"""``EventStoreRunner``: the SDK's ``Runner.run`` / ``run_sync`` / ``run_streamed``, durable on an
``EventStoreSession``'s log (``pip install 'agent-eventstore[openai-agents]'``)::

    result = await EventStoreRunner.run(agent, "Buy the book", session=session,
                                        idempotent_tools={"lookup_price"})

Same arguments, same result types. Built on the SDK's public API only: the agent is cloned with
its model wrapped (``DurableModel``: each response is recorded in the log before the SDK acts on
it, and a recorded one is returned without asking the model) and each ``FunctionTool``'s
``on_invoke_tool`` wrapped (a claim is appended before the body runs, the output right after;
a recorded output is returned without running it); the SDK gets a view of the session that
skips the items a resumed run already stored. What each event means: ``records``. What the
SDK gives back names the caller's agents and tools, not the clones (``public``): results,
streamed events, a tool's ``ToolContext.agent``, the tools the model is given; a ``RunState``
given back is left where the run got to, as the SDK's ``Runner`` leaves it.

Crash anywhere, resume: calling the runner again on the session (with the same input, or
``""``, or the ``RunState`` the run returned) continues its unfinished run: the SDK replays the
recorded steps, nothing recorded is asked for or run again, and a call that was started and has
no output is *in doubt*: unless its tool is in ``idempotent_tools`` the runner raises
``CallInDoubtError`` instead of running it (``evs respond`` gives its result, ``evs rerun``
allows one more run). A different input starts a new run (the unfinished one is abandoned).

Approvals from any process: when a tool with ``needs_approval`` interrupts the run, the stop is
in the log as a confirmation request (docs/protocol.md §5) holding the SDK's
``RunState.to_json()``; ``evs pending`` lists it and ``evs confirm SESSION ID --yes|--no``
answers it. The next call loads that ``RunState`` from the log, applies the answers
(``RunState.approve`` / ``reject``) and continues: an approved tool runs once, a rejected one
gets the SDK's rejection. Decisions made in process on ``result.to_state()`` are recorded as
the same answers when the state is given back (to ``run`` or ``run_streamed``). A ``RunState``
the log has no stop for (a finished run's, or one the SDK's ``Runner`` made) starts a durable
run from it, its JSON recorded as the run's input: given again after a crash, it resumes.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import orjson
from agents import Agent, Handoff, Model, RunConfig, RunContextWrapper, Runner, RunState
from agents.exceptions import (
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
)
from agents.models.multi_provider import MultiProvider
from agents.result import RunResult, RunResultStreaming
from agents.run_config import DEFAULT_MAX_TURNS
from agents.tool import FunctionTool
from pydantic_core import to_jsonable_python

from eventstore import CallRecord, StoreUsageError

from .agent_tools import child_decisions, is_agent_tool, wrap_agent_tool
from .durable import CallInDoubtError, DurableRun
from .items import plain_item
from .model import DurableModel, _RunRef
from .public import continued, mark_public, public, public_event, publish
from .records import recorded_output
from .session import EventStoreSession

__all__ = ["DurableModel", "EventStoreRunner", "RecordedToolError"]

_ENDS_RUN = (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered,
             MaxTurnsExceeded)
"""Errors a replay would raise again: the run ends with them (a new call starts anew)."""


_FROM_STATE = "run_state"
"""Key of a run's recorded input when it started from a ``RunState`` (its JSON)."""


class RecordedToolError(RuntimeError):
    """A tool that raised when it ran: a resumed run raises its recorded error again."""


class _RunSession:
    """The SDK's ``Session`` for one durable run: the history, then the run's own items;
    items a resumed run already stored are not stored again."""

    def __init__(self, ref: _RunRef, session: EventStoreSession) -> None:
        self._ref = ref
        self.session_id = session.session_id
        self.session_settings = session.session_settings

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = (await self._ref.get()).view_items()
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        chosen = items if limit is None else (items[-limit:] if limit > 0 else [])
        result: list[Any] = orjson.loads(orjson.dumps(chosen))
        return result

    async def add_items(self, items: list[Any]) -> None:
        await (await self._ref.get()).add_items(list(items))

    async def pop_item(self) -> Any | None:
        # The SDK pops only to rewind a turn it retries; the log keeps the pop.
        run = await self._ref.get()
        if run.held and run.item_cursor == len(run.record.items) + len(run.held):
            run.item_cursor -= 1
            from .items import METADATA_KEY

            return run.held.pop().custom_metadata[METADATA_KEY]["item"]
        if run.item_cursor > 0 and run.item_cursor == len(run.record.items):
            run.item_cursor -= 1
            run.record.items.pop()
            return await run.session.pop_item()
        return None

    async def clear_session(self) -> None:
        run = await self._ref.get()
        run.base_items.clear()
        await run.session.clear_session()


def _settled(record: CallRecord) -> Any:
    """What a settled call's tool returns again: its recorded output, or its recorded
    error raised again (``RecordedToolError``)."""
    assert record.response is not None
    error = record.response.get("error")
    if isinstance(error, Mapping) and error.get("kind") == "execution_failed" \
            and set(record.response) == {"error"}:
        raise RecordedToolError(str(error.get("message")))
    return recorded_output(record.response)


def _tool_wrapper(tool: FunctionTool, ref: _RunRef, agent: Agent[Any]) -> FunctionTool:
    author = agent.name
    if is_agent_tool(tool):
        wrapped = wrap_agent_tool(tool, get_run=ref.get, author=author,
                                  runner=EventStoreRunner,
                                  options={"idempotent_tools": ref.idempotent,
                                           "run_config": ref.config},
                                  parent_config=ref.sdk_config, settled=_settled)
        mark_public(wrapped, tool)
        return wrapped
    original = tool.on_invoke_tool

    async def invoke(context: Any, raw: str) -> Any:
        if public(getattr(context, "agent", None)) is agent:
            context.agent = agent  # the tool sees the caller's agent, not the durable clone
        run = await ref.get()
        sdk_id = str(getattr(context, "tool_call_id", "") or "")
        call_id = run.calls.get(sdk_id, sdk_id)
        record = run.record.ledger.get(call_id)
        decision = record.decision(idempotent=tool.name in run.idempotent)
        if decision == "settled":
            return _settled(record)
        if decision == "in_doubt":
            raise CallInDoubtError(session_id=run.session.session_id,
                                   function_call_id=call_id, tool=tool.name)
        await run.claim(call_id, sdk_id, author=author)
        try:
            value = await original(context, raw)
        except Exception as exc:
            await run.record_output(call_id, sdk_id, tool=tool.name, author=author, response={
                "error": {"kind": "execution_failed", "tool": tool.name, "message": str(exc)}})
            raise
        await run.record_output(call_id, sdk_id, tool=tool.name, author=author,
                                response=run.output_response(value))
        return value

    wrapped = dataclasses.replace(tool, on_invoke_tool=invoke)
    mark_public(wrapped, tool)
    return wrapped


def _wrap_agent(agent: Agent[Any], run: _RunRef, config: RunConfig,
                memo: dict[int, Agent[Any]]) -> Agent[Any]:
    """A clone of ``agent`` (and of the agents it hands off to) with its model and function
    tools made durable."""
    if id(agent) in memo:
        return memo[id(agent)]
    model = config.model if config.model is not None else agent.model
    if not isinstance(model, Model):
        provider = config.model_provider or MultiProvider()
        model = provider.get_model(model or None)
    clone = agent.clone(model=DurableModel(model, run, author=agent.name))
    mark_public(clone, agent)
    memo[id(agent)] = clone
    wrapped: dict[int, Any] = {}

    def tools() -> list[Any]:
        for tool in agent.tools:
            if id(tool) not in wrapped and isinstance(tool, FunctionTool):
                wrapped[id(tool)] = _tool_wrapper(tool, run, agent)
        return [wrapped.get(id(t), t) for t in agent.tools]

    async def get_all_tools(run_context: Any) -> list[Any]:
        # The caller's agent's tools as they are now: a tool may add one during the run
        # (assigned only then: the SDK watches assignments to an agent's tools).
        current = tools()
        if len(current) != len(clone.tools) or any(
                a is not b for a, b in zip(current, clone.tools, strict=True)):
            clone.tools = current
        return await Agent.get_all_tools(clone, run_context)

    clone.tools = tools()
    object.__setattr__(clone, "get_all_tools", get_all_tools)
    handoffs: list[Agent[Any] | Handoff[Any, Any]] = []
    for target in agent.handoffs:
        if isinstance(target, Agent):
            handoffs.append(_wrap_agent(target, run, config, memo))
        elif isinstance(target, Handoff):
            handoffs.append(_wrap_handoff(target, run, config, memo))
        else:
            handoffs.append(target)
    clone.handoffs = handoffs
    return clone


def _wrap_handoff(handoff: Handoff[Any, Any], run: _RunRef, config: RunConfig,
                  memo: dict[int, Agent[Any]]) -> Handoff[Any, Any]:
    original = handoff.on_invoke_handoff

    async def invoke(*args: Any, **kwargs: Any) -> Any:
        return _wrap_agent(await original(*args, **kwargs), run, config, memo)

    return dataclasses.replace(handoff, on_invoke_handoff=invoke)


def _input_json(value: Any) -> Any:
    if isinstance(value, str):
        return value
    return [plain_item(item, index) for index, item in enumerate(value)]


def _state_decisions(state: RunState[Any, Any]) -> dict[str, bool]:
    """SDK call id → the decision recorded on ``state`` (``approve`` / ``reject``)."""
    found: dict[str, bool] = {}
    context = state.to_json().get("context") or {}
    for entry in context.get("function_tool_approvals") or ():
        decision = entry.get("decision") or {}
        for verdict, key in ((True, "approved"), (False, "rejected")):
            ids = decision.get(key)
            if isinstance(ids, list):
                found.update({str(i): verdict for i in ids})
    return found


async def _relayed(events: Callable[[], AsyncIterator[Any]], link: Mapping[str, Any] | None
                   ) -> AsyncIterator[Any]:
    """The SDK's streamed events as ``run_streamed`` hands them on (naming the caller's agents,
    unless the run is a nested one); an error caused by a call in doubt surfaces as that
    CallInDoubtError."""
    try:
        async for event in events():
            yield event if link is not None else public_event(event)
    except BaseException as exc:
        doubt = _in_doubt(exc)
        if doubt is not None:
            raise doubt from None
        raise


def _in_doubt(error: BaseException) -> CallInDoubtError | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, CallInDoubtError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class EventStoreRunner:
    """``Runner.run`` / ``run_sync`` / ``run_streamed`` made durable on an
    ``EventStoreSession`` (see the module): the same arguments plus ``idempotent_tools``
    (names of tools that may run again after a crash), the same result types. ``session`` is
    required. Raises ``CallInDoubtError`` when the run reaches a call in doubt."""

    @classmethod
    async def _prepare(cls, starting_agent: Agent[Any], input: Any, *, session: Any,
                       idempotent_tools: Iterable[str], run_config: Any,
                       link: Mapping[str, Any] | None = None) -> tuple[
                           _RunRef, Agent[Any], Any, RunConfig]:
        if not isinstance(session, EventStoreSession):
            raise StoreUsageError("EventStoreRunner needs session=EventStoreSession(...): the "
                                  f"run is recorded in its log (got {type(session).__name__}).")
        config = RunConfig(**run_config) if isinstance(run_config, dict) else (
            run_config or RunConfig())
        given_state = input if isinstance(input, RunState) else None
        # A given state not stopped in this log starts a run from it (its JSON the run's input).
        input_json = {_FROM_STATE: given_state.to_json()} if given_state is not None \
            else _input_json(input)
        run = await DurableRun.open(session, input_json=input_json, agent=starting_agent.name,
                                    idempotent=frozenset(idempotent_tools),
                                    resume_any=given_state is not None, link=link)
        ref = _RunRef(run, config=config, idempotent=idempotent_tools)
        agent = _wrap_agent(starting_agent, ref, config, {})
        config = ref.sdk_config
        stop = run.record.interruption
        if stop is None:
            stored = run.record.input
            if isinstance(stored, Mapping) and _FROM_STATE in stored:
                # A run from a given state (or its resume after a crash): the SDK continues
                # that state; recorded steps are replayed from the first.
                return ref, agent, await RunState.from_json(agent, stored[_FROM_STATE]), config
            if run.resumed and given_state is not None:
                # Stopped with no stop in the log (a hosted MCP approval is no call of ours):
                # the caller's state continues the run where its log ends.
                run.next_model = len(run.record.models)
                run.item_cursor = len(run.record.items)
                for step in range(run.next_model):
                    run.use_calls(step)
                return ref, agent, await RunState.from_json(agent, given_state.to_json()), config
            if run.resumed:
                return ref, agent, to_jsonable_python(stored), config
            return ref, agent, input, config
        if given_state is not None:
            # The caller's state is the newer one (its approvals, of any kind of tool); its
            # function tools' decisions are recorded in the log as answers first.
            await run.answer(_state_decisions(given_state))
        state = await RunState.from_json(
            agent, given_state.to_json() if given_state is not None else stop.state)
        run.next_model = stop.models
        run.item_cursor = stop.items
        for step in range(min(stop.models, len(run.record.models))):
            run.use_calls(step)
        by_sdk = {sdk: confirm for confirm, sdk in stop.calls.items()}
        nested = await child_decisions(run) if stop.nested else {}
        for item in state.get_interruptions():
            sdk_id = str(getattr(item.raw_item, "call_id", "") or "")
            if run.owns(item):
                answer = run.record.answers.get(by_sdk.get(sdk_id, ""))
            else:
                answer = nested.get(sdk_id)  # its child records the rejection itself
            if answer is True:
                state.approve(item)
            elif answer is False:
                state.reject(item)
                if run.owns(item):
                    await run.reject(run.calls.get(sdk_id, sdk_id),
                                     tool=str(item.tool_name or ""),
                                     author=getattr(item.agent, "name", run.record.agent))
        return ref, agent, state, config

    @classmethod
    async def _finish(cls, run: DurableRun, result: Any) -> None:
        if result.interruptions:
            await run.interrupt(result.interruptions, state=result.to_state().to_json())
        else:
            await run.end("completed")

    @classmethod
    async def run(cls, starting_agent: Agent[Any], input: Any, *, session: Any,
                  idempotent_tools: Iterable[str] = (), context: Any = None,
                  max_turns: int | None = DEFAULT_MAX_TURNS, hooks: Any = None,
                  run_config: Any = None, error_handlers: Any = None,
                  previous_response_id: str | None = None,
                  auto_previous_response_id: bool = False,
                  conversation_id: str | None = None) -> RunResult:
        """``Runner.run``, durable (see the class)."""
        return await cls._run_child(
            starting_agent, input, session=session, link=None,
            idempotent_tools=idempotent_tools, context=context, max_turns=max_turns,
            hooks=hooks, run_config=run_config, error_handlers=error_handlers,
            previous_response_id=previous_response_id,
            auto_previous_response_id=auto_previous_response_id,
            conversation_id=conversation_id)

    @classmethod
    async def _run_child(cls, starting_agent: Agent[Any], input: Any, *, session: Any,
                         link: Mapping[str, Any] | None, idempotent_tools: Iterable[str] = (),
                         run_config: Any = None, **options: Any) -> RunResult:
        """``run``; with ``link``, the nested run of an agent tool in its child session."""
        ref, agent, sdk_input, config = await cls._prepare(
            starting_agent, input, session=session, idempotent_tools=idempotent_tools,
            run_config=run_config, link=link)
        run = await ref.get()
        try:
            result = await Runner.run(agent, sdk_input, run_config=config,
                                      session=_RunSession(ref, session), **options)
        except BaseException as exc:
            doubt = _in_doubt(exc)
            if doubt is not None:
                raise doubt from None
            if isinstance(exc, _ENDS_RUN):
                await run.end("error")
            if isinstance(exc, Exception):  # the SDK's Runner leaves the state where it failed
                await continued(input, sdk_input, starting_agent)
            raise
        await continued(input, sdk_input, starting_agent)
        await cls._finish(run, result)
        if link is None:  # a nested run's result goes on to the SDK's agent tool as it is
            publish(result)
        return result

    @classmethod
    def run_sync(cls, starting_agent: Agent[Any], input: Any, *, session: Any,
                 **options: Any) -> RunResult:
        """``Runner.run_sync``, durable: ``run`` on a loop of its own (from a thread with no
        running loop, as the SDK's)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(cls.run(starting_agent, input, session=session, **options))
        raise RuntimeError("EventStoreRunner.run_sync cannot be called from a running event "
                           "loop: await EventStoreRunner.run(...) instead.")

    @classmethod
    def run_streamed(cls, starting_agent: Agent[Any], input: Any, context: Any = None,
                     max_turns: int | None = DEFAULT_MAX_TURNS, hooks: Any = None,
                     run_config: Any = None, previous_response_id: str | None = None,
                     auto_previous_response_id: bool = False,
                     conversation_id: str | None = None, session: Any = None, *,
                     error_handlers: Any = None, idempotent_tools: Iterable[str] = ()
                     ) -> RunResultStreaming:
        """``Runner.run_streamed``, durable, with its parameters in the same places (the SDK
        takes them positionally too; ``session`` is required): returns the SDK's
        ``RunResultStreaming`` at once; the run is opened in the log when the SDK first reads
        the session, recorded as it streams, and its end (or stop for approvals) recorded once
        ``stream_events()`` is exhausted. A run that crashed resumes when streamed again with
        the same input; given a ``RunState``, the run continues from it as with ``run``."""
        return cls._run_child_streamed(
            starting_agent, input, session=session, link=None,
            idempotent_tools=idempotent_tools, context=context, max_turns=max_turns,
            hooks=hooks, run_config=run_config, previous_response_id=previous_response_id,
            auto_previous_response_id=auto_previous_response_id,
            conversation_id=conversation_id, error_handlers=error_handlers)

    @classmethod
    def _run_child_streamed(cls, starting_agent: Agent[Any], input: Any, *, session: Any,
                            link: Mapping[str, Any] | None,
                            idempotent_tools: Iterable[str] = (), **options: Any
                            ) -> RunResultStreaming:
        """``run_streamed``; with ``link``, the streamed nested run of an agent tool."""
        if not isinstance(session, EventStoreSession):
            raise StoreUsageError("EventStoreRunner needs session=EventStoreSession(...): the "
                                  f"run is recorded in its log (got {type(session).__name__}).")
        if isinstance(input, RunState):
            return cls._continue_streamed(starting_agent, input, session=session, link=link,
                                          idempotent_tools=idempotent_tools, **options)
        config = options.pop("run_config", None)
        config = RunConfig(**config) if isinstance(config, dict) else (config or RunConfig())
        input_json = _input_json(input)

        async def opener() -> DurableRun:
            run = await DurableRun.open(session, input_json=input_json,
                                        agent=starting_agent.name,
                                        idempotent=frozenset(idempotent_tools),
                                        resume_any=False, exact=True, link=link)
            if run.record.interruption is not None:
                raise StoreUsageError(
                    f"The run of session {session.session_id!r} is stopped for approvals: "
                    "continue it with EventStoreRunner.run, which loads its RunState.")
            return run

        ref = _RunRef(opener=opener, config=config, idempotent=idempotent_tools)
        agent = _wrap_agent(starting_agent, ref, config, {})
        result = Runner.run_streamed(agent, input, run_config=ref.sdk_config,
                                     session=_RunSession(ref, session), **options)
        events = result.stream_events

        async def stream() -> AsyncIterator[Any]:
            try:
                async for event in _relayed(events, link):
                    yield event
            except _ENDS_RUN:
                if ref.run is not None:
                    await ref.run.end("error")
                raise
            if ref.run is not None:
                await cls._finish(ref.run, result)
            if link is None:
                publish(result)

        result.stream_events = stream  # type: ignore[method-assign]
        return result

    @classmethod
    def _continue_streamed(cls, starting_agent: Agent[Any], state: RunState[Any, Any], *,
                           session: EventStoreSession, link: Mapping[str, Any] | None,
                           idempotent_tools: Iterable[str], **options: Any
                           ) -> RunResultStreaming:
        """``run_streamed`` given a ``RunState``: what ``run`` does with one, streamed. The
        state is loaded from the log (and bound to the durable clones) only once awaited, so
        the result handed back at once is a placeholder until ``stream_events()`` starts;
        from then on it shares every attribute with the SDK's streamed result."""
        run_config = options.pop("run_config", None)
        result = RunResultStreaming(
            input=copy.deepcopy(state._original_input), new_items=list(state._session_items),
            current_agent=starting_agent, raw_responses=list(state._model_responses),
            final_output=None, is_complete=False, current_turn=state._current_turn,
            max_turns=options.get("max_turns", DEFAULT_MAX_TURNS),
            input_guardrail_results=list(state._input_guardrail_results),
            output_guardrail_results=list(state._output_guardrail_results),
            tool_input_guardrail_results=[], tool_output_guardrail_results=[],
            _current_agent_output_schema=None, trace=None,
            context_wrapper=state._context or RunContextWrapper(context=options.get("context")))
        started = False
        # The SDK's Runner starts its run's task now, in the caller's context; ours starts it
        # once the state is loaded, in a copy of the context taken now.
        caller_context = contextvars.copy_context()

        async def stream() -> AsyncIterator[Any]:
            nonlocal started
            if started:  # the SDK's stream_events, called again on a shared result
                async for event in RunResultStreaming.stream_events(result):
                    yield event
                return
            started = True
            ref, agent, sdk_state, config = await cls._prepare(
                starting_agent, state, session=session, idempotent_tools=idempotent_tools,
                run_config=run_config, link=link)
            run = await ref.get()
            start: Callable[..., RunResultStreaming] = Runner.run_streamed
            inner = caller_context.run(start, agent, sdk_state, run_config=config,
                                       session=_RunSession(ref, session), **options)
            events = inner.stream_events
            result.__dict__ = inner.__dict__
            result.stream_events = stream  # type: ignore[method-assign]
            try:
                async for event in _relayed(events, link):
                    yield event
            except CallInDoubtError:
                raise
            except BaseException as exc:
                if isinstance(exc, _ENDS_RUN):
                    await run.end("error")
                if isinstance(exc, Exception):
                    await continued(state, sdk_state, starting_agent)
                raise
            await continued(state, sdk_state, starting_agent)
            await cls._finish(run, inner)
            if link is None:
                publish(result)

        result.stream_events = stream  # type: ignore[method-assign]
        return result
