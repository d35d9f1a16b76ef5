"""``AgentTool``: a child agent behind a tool interface, its history a session of its own.

Data plane shared, control plane isolated:

- the child runs in its own session of the same store, app and user, with an id derived from the
  parent session and the parent's call id (``child_session_id``), so a re-run of the call finds it;
  its first event records the link to the parent (``custom_metadata["parent"]``);
- it starts with the parent's state minus internal keys (``temp:`` and ``_``-prefixed);
  ``user:``/``app:`` keys are shared by scope anyway;
- only the child's final text comes back (``{"result": text}``); its escalate/transfer actions stay
  in its own log and never reach the parent's actions (an escalation ends the child's invocation,
  and the parent's call answers ``{"result": "", "escalated": <reason>}``);
- a confirmation the child asks for pauses the parent too: the parent's call requests a
  confirmation naming the child's; answering the parent's answers the child's and resumes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, assert_never

from eventstore import Event, EventStore, SessionNotFoundError
from runtime._agent import Agent
from runtime._context import ToolContext
from runtime._exceptions import ConfirmationRequired, InvalidToolArgumentsError
from runtime._invocation import RunStatus
from runtime._runner import Runner
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema

from ._confirmations import recover_confirmations
from ._pending import pending
from ._planner import ReplayResumePlanner
from ._respond import answer_confirmation

__all__ = [
    "FORWARDED_FROM_KEY",
    "INTERNAL_STATE_PREFIXES",
    "PARENT_LINK_KEY",
    "AgentTool",
    "child_session_id",
]

INTERNAL_STATE_PREFIXES = ("temp:", "_")
"""State keys with these prefixes are not copied into a child agent's session."""

PARENT_LINK_KEY = "parent"
"""``custom_metadata`` key of a child session's first event: the parent session and call."""

FORWARDED_FROM_KEY = "forwarded_from"
"""``custom_metadata`` key marking a child's event forwarded into the parent's event stream
(``emit_internal_events``): ``{agent, session_id, function_call_id}``. Such events are the
child's (author, ``seq`` and id are the child session's); they are never stored in the parent."""


def child_session_id(parent_session_id: str, call_id: str) -> str:
    """Return the child session id of one parent call (stable; at most 255 characters)."""
    readable = f"{parent_session_id}/{call_id}"
    if len(readable) <= 255:
        return readable
    digest = hashlib.sha256(f"{parent_session_id}\0{call_id}".encode()).hexdigest()[:32]
    return f"{parent_session_id[:200]}/{digest}"


class AgentTool:
    """Runs ``agent`` as a tool of another agent, in a child session linked to the call.

    Guarantees: the child's session id is ``child_session_id(parent, call)``; a re-run of the same
    call continues that session instead of starting over (so the tool is idempotent: the child's
    own log dedups its calls); the parent receives ``{"result": final_text}`` and nothing of the
    child's control flow; a child paused for confirmation raises ``ConfirmationRequired`` on the
    parent's call, whose answer is passed on to the child when the parent resumes.
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
        emit_internal_events: bool = False,
    ) -> None:
        self.agent = agent
        """The child agent."""
        self.store = store
        """The store both sessions live in."""
        self.skip_summarization = skip_summarization
        """Hand the child's answer to the user without another parent model call."""
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
        """No: the child runs within the call (it pauses through a confirmation instead)."""
        return False

    def declaration(self) -> FunctionDeclaration:
        """One required string parameter, ``request``."""
        return declaration_from_json_schema(
            self.name,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {"request": {"type": "string", "description": "The request."}},
                "required": ["request"],
            },
        )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Run (or continue) the child and return its final text as ``{"result": …}``."""
        request = args.get("request")
        if not isinstance(request, str):
            raise InvalidToolArgumentsError(self.name, errors=["request: must be a string"])
        parent = await self.store.session_info(ctx.session_id)
        child = child_session_id(ctx.session_id, ctx.function_call_id)
        runner = Runner(
            agent=self.agent,
            store=self.store,
            app_name=parent.app_name,
            resume_planner=ReplayResumePlanner(),
        )
        try:
            events = (await self.store.get_session(child)).events
        except SessionNotFoundError:
            events = None
        if events is None:
            await self.store.create_session(
                app_name=parent.app_name,
                user_id=parent.user_id,
                session_id=child,
                state=_shared_state(ctx.state),
            )
            await self.store.append(
                child,
                Event(
                    author="user",
                    custom_metadata={
                        PARENT_LINK_KEY: {
                            "session_id": ctx.session_id,
                            "function_call_id": ctx.function_call_id,
                            "agent": ctx.agent_name,
                            "invocation_id": ctx.invocation_id,
                        }
                    },
                ),
                expected_version=None,
            )
            result = await runner.run(
                session_id=child,
                user_id=parent.user_id,
                new_message=request,
                metadata=ctx.metadata,
                on_event=self._forwarder(ctx, child),
            )
        else:
            done = _finished_text(events, self.agent.name)
            if done is not None:
                return self._answer(ctx, done)
            open_confirmations = pending(events).confirmations
            answer = ctx.tool_confirmation
            if open_confirmations and answer is None:
                self._interrupt(ctx, child, [c.confirmation_id or "" for c in open_confirmations])
            if answer is not None:
                for entry in open_confirmations:
                    await answer_confirmation(
                        self.store,
                        session_id=child,
                        confirmation_id=entry.confirmation_id or "",
                        confirmed=answer.confirmed,
                        payload=answer.payload,
                    )
            result = await runner.run(
                session_id=child,
                user_id=parent.user_id,
                metadata=ctx.metadata,
                on_event=self._forwarder(ctx, child),
            )
        status = result.status
        if status == "completed":
            return self._answer(ctx, result.final_text)
        elif status == "escalated":
            # The child's escalation ends the child's invocation only; the parent gets its reason.
            return {"result": result.final_text, "escalated": result.pause_reason}
        elif status == "paused_for_confirmation":
            self._interrupt(ctx, child, list(result.pending_call_ids))
        elif (
            status == "paused_long_running"
            or status == "paused_by_planner"
            or status == "step_limit"
        ):
            return self._paused(child, status, result.pause_reason)
        else:
            assert_never(status)

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

    def _paused(self, child: str, status: RunStatus, reason: str | None) -> dict[str, Any]:
        return {
            "error": {
                "kind": "agent_paused",
                "tool": self.name,
                "message": f"Agent {self.name!r} stopped ({status}): {reason or 'no reason given'}",
            },
            "child_session_id": child,
        }

    def _answer(self, ctx: ToolContext, text: str) -> dict[str, Any]:
        if self.skip_summarization:
            ctx.actions.skip_summarization = True
        return {"result": text}

    def _interrupt(self, ctx: ToolContext, child: str, confirmation_ids: list[str]) -> NoReturn:
        raise ConfirmationRequired(
            f"Agent {self.name!r} needs a confirmation before it can go on.",
            payload={"child_session_id": child, "child_confirmation_ids": confirmation_ids},
        )


def _shared_state(state: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in state.items()
        if not key.startswith((*INTERNAL_STATE_PREFIXES, "user:", "app:"))
    }


def _finished_text(events: list[Event], agent_name: str) -> str | None:
    """The child's final answer when its newest agent event is one and nothing is pending."""
    for event in reversed(events):
        if event.author != agent_name:
            continue
        if event.is_final_response() and not event.function_calls() and event.text():
            newest = list(reversed(events))
            if recover_confirmations(newest, agent_name=agent_name).calls or pending(events):
                return None
            return event.text()
        return None
    return None
