"""At most once where ADK's Resume says at least once: an ADK plugin that records each tool
call's start in the log before the tool runs, and decides on resume from the log alone.

ADK's resumable apps (``App(resumability_config=ResumabilityConfig(is_resumable=True))``)
re-run, on resume, every call of the newest model turn that has no function response: a tool
that crashed after its effect (an approved payment, say) runs again. Registered on the App or
the Runner over ``EventStoreSessionService``, ``EventStoreDurabilityPlugin`` keeps the crash
policy of docs/protocol.md §3 and §9 instead:

- before a tool runs, its call is *claimed*: the protocol's execution-started event
  (``eventstore.claim_event``), appended with ``expected_version`` = the version the ADK session
  object was read at (``EventStoreSessionService.append_claim``), so ADK's session object and
  the log stay at one version, and a process that lost the race never runs the tool (ADK's
  ``StaleSessionError``). A call that waits for ADK's confirmation gate is not claimed: the
  gate answers it, the tool does not run;
- what the log says of a call decides (``eventstore.CallLedger``): a recorded result is returned
  without running the tool (``settled``); a call never claimed runs (``run``); a claimed call
  without a result — its process may have died mid-run — runs again only if its tool is
  declared idempotent (``idempotent_tools=…``) or ``evs rerun`` allowed one more run
  (``rerun``); otherwise it is *in doubt* (``in_doubt``): it does not run, the invocation stops
  with ``ToolCallInDoubt``, and the call stays unanswered in the log, where ``evs pending``
  lists it as in doubt. ``evs respond SESSION CALL --result …`` records its result (the tool
  never runs again), ``evs rerun SESSION CALL`` allows one more run; the next ``run_async``
  (with the invocation id, as any ADK resume) continues from there;
- a confirmation request whose "requires confirmation" answer a crash left out gets that
  answer as ADK writes it, when the invocation is resumed (``before_run_callback``), so the
  log says the call waits for its confirmation;
- a model response already recorded is not requested again: ADK asks the model once more when
  an invocation's final answer was recorded but the process died before the invocation ended;
  the plugin then answers that request with the recorded answer (``before_model_callback``).

The claims and re-run decisions are bookkeeping ADK never reads: the session service leaves
them out of ADK's view of the session (ADK's resume would read a claim as a pause).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.sessions import Session
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from typing_extensions import override

from eventstore import CallRecord, StoreUsageError, idempotency_key

from .sessions import EventStoreSessionService

__all__ = ["IDEMPOTENT_ATTRIBUTE", "EventStoreDurabilityPlugin", "ToolCallInDoubt"]

IDEMPOTENT_ATTRIBUTE = "evs_idempotent"
"""A tool with this attribute set to True (``tool.evs_idempotent = True``) is idempotent to the
plugin, like one named in ``idempotent_tools``."""

_REQUEST_CONFIRMATION = "adk_request_confirmation"
_ASKED = "This tool call requires confirmation, please approve or reject."
"""ADK's own answer to a call its confirmation gate holds back."""


class ToolCallInDoubt(BaseException):
    """The invocation stopped before a call *in doubt*: the log says it started (a claim) and
    has no result, so its process may have died while it ran, and its tool is not idempotent.

    The tool did not run again. The call stays unanswered: ``evs pending`` lists it as in doubt,
    ``evs respond`` records its result, ``evs rerun`` allows one more run, and the next
    ``run_async`` of the invocation (``invocation_id``) continues. Like ADK's own interruption
    signal it is a ``BaseException``, so ADK's plugin manager and tool error handlers, which
    catch ``Exception``, let it reach the caller of ``run_async`` unchanged.
    """

    def __init__(self, *, session_id: str, invocation_id: str, function_call_id: str,
                 tool: str, claims: int) -> None:
        self.session_id = session_id
        """The session."""
        self.invocation_id = invocation_id
        """The invocation to resume (``run_async(invocation_id=…)``)."""
        self.function_call_id = function_call_id
        """The call in doubt."""
        self.tool = tool
        """Its tool."""
        self.idempotency_key = idempotency_key(session_id, function_call_id)
        """The call's stable idempotency key (what its side effects can be looked up by)."""
        super().__init__(
            f"Call {function_call_id!r} of tool {tool!r} in session {session_id!r} started "
            f"({claims} claim(s)) and has no result: it is in doubt and did not run again. "
            f"Record its result with `evs respond {session_id} {function_call_id} --result "
            f"JSON` or allow one more run with `evs rerun {session_id} {function_call_id}`, "
            f"then resume invocation {invocation_id!r}."
        )


class EventStoreDurabilityPlugin(BasePlugin):
    """Claims every tool call in the log before its tool runs and, on resume, returns recorded
    results, re-runs only idempotent (or decided) calls and stops at calls in doubt (see the
    module docstring).

    ``session_service`` is the runner's ``EventStoreSessionService``. ``idempotent_tools``
    names the tools that may safely run again after a crash (also: a tool with
    ``IDEMPOTENT_ATTRIBUTE`` set). Raises ``StoreUsageError`` when ``session_service`` is not an
    ``EventStoreSessionService``. A run raises ``ToolCallInDoubt`` at a call in doubt, and ADK's
    ``StaleSessionError`` when another process claimed or answered the session first (the tool
    did not run). A long-running call claimed and never answered is in doubt too when ADK asks
    to run it again (ADK's Resume normally waits for its result instead).
    """

    def __init__(
        self,
        session_service: EventStoreSessionService,
        *,
        idempotent_tools: Collection[str] = (),
        name: str = "evs_durability",
    ) -> None:
        super().__init__(name=name)
        if not isinstance(session_service, EventStoreSessionService):
            raise StoreUsageError(
                "EventStoreDurabilityPlugin needs the runner's EventStoreSessionService, not "
                f"{type(session_service).__name__}."
            )
        self._service = session_service
        self._idempotent = frozenset(idempotent_tools)
        # Parallel calls of one model turn claim one after another: each claim expects the
        # version the previous one left (one lock per session and event loop).
        self._locks: dict[tuple[str, str, str, int], asyncio.Lock] = {}

    def is_idempotent(self, tool: BaseTool) -> bool:
        """Whether ``tool`` may run again after a crash left its call without a result."""
        return tool.name in self._idempotent or getattr(tool, IDEMPOTENT_ATTRIBUTE, False) is True

    def _lock(self, session: Session) -> asyncio.Lock:
        key = (session.app_name, session.user_id, session.id, id(asyncio.get_running_loop()))
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    @override
    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        call_id = tool_context.function_call_id
        if not call_id:
            return None
        if await self._gate_answers(tool, tool_args, tool_context):
            return None  # ADK's confirmation gate answers the call; the tool does not run
        session = tool_context.session
        async with self._lock(session):
            record = await self._service.call_record(session, call_id)
            decision = record.decision(idempotent=self.is_idempotent(tool))
            if decision == "settled":
                assert record.response is not None
                return dict(record.response)
            if decision == "in_doubt" and not _asked_confirmation_and_answered(
                    record, tool_context):
                raise ToolCallInDoubt(
                    session_id=session.id, invocation_id=tool_context.invocation_id,
                    function_call_id=call_id, tool=tool.name, claims=record.claims,
                )
            await self._service.append_claim(
                session, call_ids=[call_id], author=tool_context.agent_name,
                invocation_id=tool_context.invocation_id, branch=tool_context.branch,
            )
        return None

    @staticmethod
    async def _gate_answers(
        tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> bool:
        """Whether ADK's confirmation gate answers this call instead of running the tool: it
        asks for a confirmation (none given yet) or refuses it (rejected)."""
        if await tool.check_require_confirmation(dict(tool_args), tool_context) is not True:
            return False
        confirmation = tool_context.tool_confirmation
        return confirmation is None or not confirmation.confirmed

    @override
    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        session = invocation_context.session
        for placeholder in _missing_placeholders(session, invocation_context.invocation_id):
            await self._service.append_event(session, placeholder)
        return None

    @override
    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        recorded = _recorded_final_answer(callback_context)
        if recorded is None:
            return None
        return LlmResponse(content=recorded.content, custom_metadata=_replayed(recorded))


def _asked_confirmation_and_answered(record: CallRecord, tool_context: ToolContext) -> bool:
    """A tool that asks for confirmation itself (``tool_context.request_confirmation``) ran
    (claimed) until it asked, and its call got the placeholder after that claim: with the answer
    given, ADK runs it again by design; that run is the confirmed one, not a repeat. A claim
    newer than the placeholder is the confirmed run itself, which may have crashed."""
    return (record.placeholder and tool_context.tool_confirmation is not None
            and (record.last_claim_seq or 0) < (record.placeholder_seq or 0))


def _recorded_final_answer(callback_context: CallbackContext) -> AdkEvent | None:
    """The agent's final answer of this invocation and branch, when it is the newest event
    there: the model already answered the request ADK is about to send."""
    session = callback_context.session
    for event in reversed(session.events):
        if event.invocation_id != callback_context.invocation_id:
            return None
        if event.branch != callback_context.branch:
            continue
        if event.content is None or not event.content.parts:
            continue
        if event.author != callback_context.agent_name or event.content.role != "model":
            return None
        if event.get_function_calls() or event.partial:
            return None
        return event
    return None


def _missing_placeholders(session: Session, invocation_id: str) -> list[AdkEvent]:
    """The answers ADK writes right after a confirmation request and that a crash left out.

    ADK appends a confirmation request, then the original call's "requires confirmation"
    response. A process that died between the two leaves a call that reads, in the log, as
    never run and never asked about; restoring the response as ADK writes it makes the log say
    what ADK's resume does (the call waits for its confirmation), so ``evs pending`` lists it
    with the ``evs confirm`` command that answers it."""
    answered = {r.id for e in session.events for r in e.get_function_responses()}
    missing: list[AdkEvent] = []
    for event in session.events:
        if event.invocation_id != invocation_id or event.author == "user":
            continue
        for call in event.get_function_calls():
            original = (call.args or {}).get("originalFunctionCall")
            if call.name != _REQUEST_CONFIRMATION or call.id in answered or not isinstance(
                    original, dict):
                continue
            oid, name = original.get("id"), original.get("name")
            if not isinstance(oid, str) or not isinstance(name, str) or oid in answered:
                continue
            asked = (call.args or {}).get("toolConfirmation")
            asked = asked if isinstance(asked, dict) else {}
            answered.add(oid)
            missing.append(AdkEvent(
                invocation_id=event.invocation_id, author=event.author, branch=event.branch,
                content=types.Content(role="user", parts=[types.Part(
                    function_response=types.FunctionResponse(
                        id=oid, name=name, response={"error": _ASKED}))]),
                actions=EventActions(skip_summarization=True, requested_tool_confirmations={
                    oid: ToolConfirmation(hint=str(asked.get("hint") or ""),
                                          payload=asked.get("payload"))}),
            ))
    return missing


def _replayed(event: AdkEvent) -> dict[str, Any]:
    metadata: Mapping[str, Any] = event.custom_metadata or {}
    return {**metadata, "evs_replayed_from": event.id}
