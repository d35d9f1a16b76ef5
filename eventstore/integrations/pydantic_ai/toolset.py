"""The durable toolset: every tool call of a run goes through the log (docs/protocol.md §3, §4).

``EventStoreToolset`` wraps any toolset (function tools, MCP servers, external tools, …). For
each call it asks the session's ``CallLedger`` what the run owes it:

- ``settled`` (a result is recorded, from this run, an earlier process or ``evs respond``):
  return it without running the tool (a recorded ``ModelRetry`` is raised again);
- ``run`` / ``rerun`` (never started, or idempotent, or ``evs rerun`` allowed one more run):
  append a claim, run the tool, append its result;
- ``in_doubt`` (started, never answered, not idempotent): do not run it; the call is deferred
  (``CallDeferred``) and the run ends with ``DeferredToolRequests`` naming it, until
  ``evs respond`` records its result or ``evs rerun`` allows one more run;
- a call whose body raised ``CallDeferred`` is recorded as deferred (a deferral event, §7): it
  is long-running from then on, deferred again on every run until ``evs respond`` gives its
  result;
- a tool that needs approval runs only when the log holds a human's approval of that call
  (``evs confirm``); otherwise ``ApprovalRequired`` is raised before anything is claimed.

A tool's body may not call ``ctx.enqueue()``, ``ctx.request_compaction()`` or ``ctx.cancel()``
(each raises pydantic-ai's ``UserError``): a resumed run would return its recorded result
without running it, and what those calls asked for would silently not happen again.

External tools (kind ``external``) are presented to pydantic-ai as function tools whose call
this toolset defers until the log holds their result, so every deferral is decided here, from
the log, in every process alike.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field, replace
from typing import Any

# Private in pydantic-ai (2.33 through 2.78 at least), but the one guard its own durable
# wrappers share: its messages are theirs, and it follows their changes.
from pydantic_ai.durable_exec._toolset import guard_run_context
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from eventstore import (
    DEFERRED_CALLS_KEY,
    RERUN_DECISION_KEY,
    Content,
    Event,
    FunctionResponse,
    Part,
)

from .journal import RunJournal
from .messages import result_payload

__all__ = ["CURRENT_JOURNAL", "EventStoreToolset", "IN_DOUBT_KEY", "recorded_value"]

CURRENT_JOURNAL: contextvars.ContextVar[RunJournal | None] = contextvars.ContextVar(
    "eventstore_pydantic_ai_journal", default=None)
"""The journal of the run this task belongs to (set by ``EventStoreAgent``)."""

IN_DOUBT_KEY = "eventstore_in_doubt"
"""``CallDeferred`` metadata key set on a call deferred because it is in doubt."""


def recorded_value(response: dict[str, Any]) -> Any:
    """The tool result a recorded response stands for (``{"result": v}`` → ``v``); a recorded
    retry is raised again as ``ModelRetry``."""
    error = response.get("error")
    if isinstance(error, dict) and error.get("kind") == "retry":
        raise ModelRetry(str(error.get("message", "")))
    if set(response) == {"result"}:
        return response["result"]
    return response


@dataclass
class EventStoreToolset(WrapperToolset[Any]):
    """A toolset whose calls are claimed, recorded and resumed from the session's log."""

    idempotent: frozenset[str] = field(default=frozenset())
    """Names of tools that may run again after a crash (reads, lookups)."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        journal = CURRENT_JOURNAL.get()
        shown: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            if journal is not None:
                journal.tool_kinds[name] = tool.tool_def.kind
            if tool.tool_def.kind == "external":
                if journal is not None:
                    journal.long_running.add(name)
                tool = replace(tool, tool_def=replace(tool.tool_def, kind="function"))
            shown[name] = tool
        return shown

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        journal = CURRENT_JOURNAL.get()
        if journal is None:
            return await super().call_tool(name, tool_args, ctx, tool)
        await journal.record_messages(ctx.messages)
        call_id = journal.stored_id(ctx.tool_call_id or "")
        if (journal.handed is not None and (ctx.tool_call_id or "") in journal.handed.approvals
                and call_id not in journal.confirmations.answers):
            # Approved by the caller before the call was in the log (a handed history).
            await journal.append_answers(journal.handed)
        record = journal.ledger.get(call_id)
        decision = record.decision(idempotent=name in self.idempotent or
                                   name in journal.idempotent)
        if decision == "settled":
            assert record.response is not None
            return recorded_value(dict(record.response))
        if name in journal.long_running or record.deferred:
            if record.claims == 0:
                await journal.claim(call_id)
            # No metadata of ours: ``DeferredToolRequests.metadata`` is the tools' own, as
            # pydantic-ai hands it over (an external call has none).
            raise CallDeferred()
        asked = call_id in journal.confirmations.requested
        if tool.tool_def.kind == "unapproved" or decision == "waits_for_confirmation" or asked:
            if journal.confirmations.answers.get(call_id) is not True:
                raise ApprovalRequired()
            ctx = replace(ctx, tool_call_approved=True)
        else:
            ctx = replace(ctx, tool_call_approved=False)
        if decision == "in_doubt":
            raise CallDeferred(metadata={IN_DOUBT_KEY: True, "call_id": call_id})
        # A resumed run returns the recorded result without running the tool again, so what
        # the tool's body enqueued, asked to compact or cancelled would silently not happen
        # then: pydantic-ai's own guard makes those calls raise UserError (as in the durable
        # units of its DBOS, Prefect and Temporal wrappers).
        ctx = guard_run_context(ctx, unit_noun="tool call", container_noun="run")
        await journal.claim(call_id)
        try:
            value = await super().call_tool(name, tool_args, ctx, tool)
        except ModelRetry as exc:
            await journal.record_result(_response(journal, call_id, name, {"error": {
                "kind": "retry", "tool": name, "message": exc.message}}))
            raise
        except ApprovalRequired:
            # Raised before the tool did anything (pydantic-ai's contract): once approved, the
            # call may run, so its claim is released by a re-run decision (§9).
            await journal.append([journal.marker({RERUN_DECISION_KEY: [call_id]})])
            raise
        except CallDeferred:
            # The call's result comes from outside: its claim stays (``evs respond`` answers
            # it, §7), and the log says it waits rather than being in doubt.
            await journal.append([journal.marker({DEFERRED_CALLS_KEY: [call_id]})])
            raise
        await journal.record_result(_response(journal, call_id, name, result_payload(value)))
        return value

    def visit_and_replace(self, visitor: Any) -> AbstractToolset[Any]:
        return replace(self, wrapped=self.wrapped.visit_and_replace(visitor))


def _response(journal: RunJournal, call_id: str, name: str, payload: dict[str, Any]) -> Event:
    return Event(
        author=journal.author,
        invocation_id=journal.invocation_id,
        content=Content(role="user", parts=(Part(function_response=FunctionResponse(
            id=call_id, name=name, response=payload)),)),
    )
