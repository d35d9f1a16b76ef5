"""``AgentTool``: a child agent behind a tool interface, its history a session of its own.

Data plane shared, control plane isolated:

- the child runs in its own session of the same store, app and user, with an id derived from the
  parent session and the parent's call id (``child_session_id``), so a re-run of the call finds it;
  its first event is the link to the parent (``custom_metadata["parent"]``), appended in one
  atomic batch with the request, so a crash at any point resumes the child with its request;
- it starts with the parent's state minus internal keys (``temp:`` and ``_``-prefixed);
  ``user:``/``app:`` keys are shared by scope anyway;
- only the child's final result comes back (``{"result": text}``, the parsed output when an
  ``output_schema`` is given, or the child's own tool result when it skipped summarization); its
  escalate/transfer actions stay in its own log and never reach the parent's actions (an
  escalation ends the child's invocation, and the parent's call answers
  ``{"result": "", "escalated": <reason>}``);
- with ``emit_internal_events=True`` each event of the child's run is forwarded into the
  parent's event stream as it comes, marked with ``FORWARDED_FROM_KEY``; never stored in the
  parent's log;
- every kind of child pause (a confirmation, a long-running call, a call in doubt) is an
  interrupt of the parent call, not an error result: the parent call stays open (no response),
  the parent pauses — ``paused_for_confirmation`` with the child's confirmation ids when the
  child waits for confirmations — and each of the child's pending items is answered in the
  child session, through the parent's id or the child's (``session_pending(store, PARENT)`` and
  ``evs pending PARENT`` list them). The parent's next run continues the child; the parent call
  is answered once, with the child's final result, when it completes. Confirmations answered
  apart are acted on one by one: the child does not complete past one still open (it waits,
  and the parent with it, ``paused_for_confirmation`` with the open ids); nor past a
  long-running call of its turn still without a result when another got one (the parent
  stays ``paused_long_running``);
- cancelling the parent's invocation stops the child at a safe point: the child's current tool
  step completes and is logged, then the child stops. With ``propagate_cancellation=True`` the
  cancellation reaches the child's running tools instead (their ``cancel_event`` is set).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import orjson
import pydantic

from eventstore import (
    ConcurrencyError,
    Content,
    Event,
    EventStore,
    Part,
    SessionExistsError,
)
from runtime._agent import Agent
from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError, ToolResultError
from runtime._runner import Runner
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema
from runtime.replay import PARENT_LINK_KEY, ReplayResumePlanner, child_session_id
from runtime.replay._escalation import escalation_reason_from_event

__all__ = ["FORWARDED_FROM_KEY", "INTERNAL_STATE_PREFIXES", "AgentTool"]

FORWARDED_FROM_KEY = "forwarded_from"
"""``custom_metadata`` key marking a child's event forwarded into the parent's event stream
(``emit_internal_events``): ``{agent, session_id, function_call_id}``. Such events are the
child's (author, ``seq`` and id are the child session's); they are never stored in the parent."""

INTERNAL_STATE_PREFIXES = ("temp:", "_")
"""State keys with these prefixes are not copied into a child agent's session."""

class AgentTool:
    """Runs ``agent`` as a tool of another agent, in a child session linked to the call.

    Guarantees: the child's session id is ``child_session_id(parent, call)``; a re-run of the same
    call continues that session instead of starting over (so the tool is idempotent: the child's
    own log dedups its calls); the parent receives the child's final result and nothing of the
    child's control flow; a paused child leaves the parent call open (the parent pauses with it)
    until the child completes. ``input_schema`` (a pydantic model or a JSON schema mapping)
    replaces the default ``{"request": str}`` parameter; ``output_schema`` validates the child's
    final answer (JSON) and a mismatch is an ``execution_failed`` response.
    """

    idempotent = True
    """Re-running continues the child's session from its log (its calls run at most once)."""

    def __init__(
        self,
        agent: Agent,
        *,
        store: EventStore,
        description: str | None = None,
        skip_summarization: bool = False,
        input_schema: type[pydantic.BaseModel] | None = None,
        output_schema: Any = None,
        propagate_cancellation: bool = False,
        emit_internal_events: bool = False,
    ) -> None:
        self.agent = agent
        """The child agent."""
        self.store = store
        """The store both sessions live in."""
        self.skip_summarization = skip_summarization
        """Hand the child's answer to the user without another parent model call: the parent
        run ends with it as its final text (``display_result``)."""
        self.input_schema = input_schema
        """The typed request (a pydantic model); ``None``: ``{"request": str}``."""
        self.output_schema = output_schema
        """A type pydantic validates the child's final answer against (read as JSON: a model,
        ``list[str]``…); ``None``: the text as is."""
        self._output: pydantic.TypeAdapter[Any] | None = (
            pydantic.TypeAdapter(output_schema) if output_schema is not None else None
        )
        self.propagate_cancellation = propagate_cancellation
        """Cancelling the parent cancels the child's running tools (default: the child stops
        after its current step, which completes and is logged)."""
        self.emit_internal_events = emit_internal_events
        """Forward each event of the child's run into the parent's event stream as it comes,
        marked with ``FORWARDED_FROM_KEY``; never stored in the parent's log, and no effect on
        the parent's state or control flow (only the child's final answer is the result)."""
        self._description = description or f"Ask agent {agent.name!r} to handle a request."

    @property
    def name(self) -> str:
        """The child agent's name."""
        return self.agent.name

    @property
    def description(self) -> str:
        """What the parent model reads."""
        return self._description

    @property
    def is_long_running(self) -> bool:
        """No: the child runs within the call (a paused child keeps the call open instead)."""
        return False

    def defers_response(self) -> bool:
        """True: a ``None`` result (a paused child) leaves the parent call without a response."""
        return True

    def display_result(self, result: Mapping[str, Any]) -> str | None:
        """With ``skip_summarization``: the text the parent run ends with (its ``final_text``),
        the child's result as the user should see it — the child's answer as is when it is
        text, else its compact JSON (keys sorted; a parsed ``output_schema`` answer, or the
        child's own tool result when it skipped summarization)."""
        if set(result) == {"result"}:
            value = result["result"]
            if isinstance(value, str):
                return value
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        return orjson.dumps(dict(result), option=orjson.OPT_SORT_KEYS).decode()

    def declaration(self) -> FunctionDeclaration:
        """The input schema's parameters, or one required string parameter, ``request``."""
        schema: Mapping[str, Any]
        if self.input_schema is None:
            schema = {
                "type": "object",
                "properties": {"request": {"type": "string", "description": "The request."}},
                "required": ["request"],
            }
        else:
            schema = self.input_schema.model_json_schema()
        return declaration_from_json_schema(
            self.name, description=self.description, parameters=dict(schema)
        )

    def _request_text(self, args: dict[str, Any]) -> str:
        if self.input_schema is None:
            request = args.get("request")
            if not isinstance(request, str):
                raise InvalidToolArgumentsError(self.name, errors=["request: must be a string"])
            return request
        try:
            model = self.input_schema.model_validate(args)
        except pydantic.ValidationError as exc:
            raise InvalidToolArgumentsError(
                self.name,
                errors=[f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()],
            ) from exc
        return model.model_dump_json()

    def _result(self, ctx: ToolContext, value: str | dict[str, Any] | _Escalated) -> dict[str, Any]:
        """The parent's response: the child's final text (or its own tool result when it
        skipped summarization), validated against ``output_schema`` when one is given."""
        if isinstance(value, _Escalated):
            # The child's escalation ends the child's invocation only; the parent gets its reason.
            return {"result": "", "escalated": value.reason}
        if self.skip_summarization:
            ctx.actions.skip_summarization = True
        if self._output is None:
            return value if isinstance(value, dict) else {"result": value}
        raw = value if isinstance(value, str) else orjson.dumps(value).decode()
        try:
            parsed = self._output.dump_python(self._output.validate_json(raw), mode="json")
        except pydantic.ValidationError as exc:
            raise ToolResultError(
                f"Agent {self.name!r} answered {raw[:200]!r}, which does not fit its output "
                f"schema: {' '.join(str(exc).split())[:300]}",
                tool_name=self.name,
            ) from exc
        return {"result": parsed}

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Run (or continue) the child; return its result, or ``None`` while it is paused."""
        request = self._request_text(args)
        parent = await self.store.session_info(ctx.session_id, app_name=ctx.app_name,
                                               user_id=ctx.user_id)
        # The child lives in the parent's app and user, and is always addressed by both.
        app, user = parent.app_name, parent.user_id
        child = child_session_id(ctx.session_id, ctx.function_call_id)
        started = await self._start(ctx, child, app, user, request)
        forward = self._forwarder(ctx, child)
        if forward is not None:
            for event in started:
                if PARENT_LINK_KEY not in event.custom_metadata:
                    forward(event)  # the child's request: the first event of its run
        events = await self.store.read(child, app_name=app, user_id=user)
        done = _finished(events, self.agent.name)
        if done is not None:
            return self._result(ctx, done)
        runner = Runner(
            agent=self.agent,
            store=self.store,
            app_name=parent.app_name,
            resume_planner=ReplayResumePlanner(),
        )
        await self._drive(runner, child, parent.user_id, ctx)
        done = _finished(await self.store.read(child, app_name=app, user_id=user),
                         self.agent.name)
        # Any other ending (a confirmation, a long-running call, a call in doubt, the step
        # limit) is a pause of the child: the parent call stays open until it completes.
        return None if done is None else self._result(ctx, done)

    async def _start(
        self, ctx: ToolContext, child: str, app_name: str, user_id: str, request: str
    ) -> list[Event]:
        """Create the child session and append link + request in one batch (crash-safe);
        return the events this call appended (none when the child had started already)."""
        with contextlib.suppress(SessionExistsError):
            await self.store.create_session(
                app_name=app_name,
                user_id=user_id,
                session_id=child,
                state=_shared_state(ctx.state),
            )
        # The session may already hold its initial state event; the link goes right after it.
        version = await self.store.version(child, app_name=app_name, user_id=user_id)
        first = await self.store.read(child, limit=4, app_name=app_name, user_id=user_id)
        if any(PARENT_LINK_KEY in e.custom_metadata for e in first):
            return []
        link = Event(
            author="user",
            custom_metadata={
                PARENT_LINK_KEY: {
                    "session_id": ctx.session_id,
                    "function_call_id": ctx.function_call_id,
                    "agent": ctx.agent_name,
                    "invocation_id": ctx.invocation_id,
                }
            },
        )
        message = Event(author="user", content=Content(role="user", parts=(Part(text=request),)))
        # ConcurrencyError: another run of this call started the child first; continue it.
        try:
            return await self.store.append(child, [link, message], expected_version=version,
                                           app_name=app_name, user_id=user_id)
        except ConcurrencyError:
            return []

    async def _drive(self, runner: Runner, child: str, user_id: str, ctx: ToolContext) -> None:
        """Run the child's invocation; on cancellation stop it at a safe point (or propagate)."""
        stream = runner.run_events(session_id=child, user_id=user_id, metadata=ctx.metadata)
        stop = asyncio.Event()
        task = asyncio.ensure_future(
            _consume(stream, stop, runner.agent.name, self._forwarder(ctx, child))
        )
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if self.propagate_cancellation:
                task.cancel()
            else:
                stop.set()  # the child finishes its current step, then stops between appends
            await asyncio.wait([task])
            raise


    def _forwarder(self, ctx: ToolContext, child: str) -> Callable[[Event], None] | None:
        if not self.emit_internal_events:
            return None
        mark = {"agent": self.name, "session_id": child, "function_call_id": ctx.function_call_id}

        def forward(event: Event) -> None:
            if FORWARDED_FROM_KEY in event.custom_metadata:  # a grandchild's: keep its mark
                ctx.emit_event(event)
                return
            metadata = {**event.custom_metadata, FORWARDED_FROM_KEY: mark}
            ctx.emit_event(dataclasses.replace(event, custom_metadata=metadata))

        return forward


@dataclasses.dataclass(frozen=True, slots=True)
class _Escalated:
    reason: str


async def _consume(
    stream: AsyncIterator[Event],
    stop: asyncio.Event,
    agent: str,
    forward: Callable[[Event], None] | None,
) -> None:
    in_step = False
    try:
        async for event in stream:
            if forward is not None:
                forward(event)
            if event.started_call_ids:
                in_step = True  # a claim: the step's tools are running
            elif event.author == agent:
                in_step = False  # its answers (or a model turn) are logged
            if stop.is_set() and not in_step:
                return
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


def _shared_state(state: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in state.items()
        if not key.startswith((*INTERNAL_STATE_PREFIXES, "user:", "app:"))
    }


def _finished(
    events: list[Event], agent_name: str
) -> str | dict[str, Any] | _Escalated | None:
    """The child's final result when its newest agent event ends it, else ``None``.

    A final text answer, a response event that escalated, or one that skipped summarization
    (then its single response, or ``{"results": [...]}``), with nothing after it from anyone else.
    """
    for event in reversed(events):
        if event.author != agent_name:
            return None
        if event.content is None:
            continue
        escalated = escalation_reason_from_event(event)
        if escalated is not None:
            return _Escalated(escalated)
        if event.content.role == "model" and not event.function_calls() and event.text():
            return event.text()
        if event.actions.skip_summarization and not event.actions.requested_tool_confirmations:
            responses = [r.response for r in event.function_responses()]
            if not responses:
                return None
            return responses[0] if len(responses) == 1 else {"results": responses}
        return None
    return None
