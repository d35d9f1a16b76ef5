"""How an invocation ends: the decisions that stop the runner's loop, and the words it says.

Three points decide. After a step, ``stopped``: a stale answer, a confirmation asked here or in
an ``AgentTool`` child, a long-running call handed back, an escalation, a skipped summary.
Before the first model call, ``settled``: the log's head (``runtime.replay.HeadScan``, the one
``pending()`` reports): a final answer, a turn still waiting for answers, an escalation. Before
every model call, ``at_step_limit``. Each fills the invocation's ``Ending``; the loop only asks.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime._escalate import escalation_reason
from runtime._execute import StepExecution
from runtime._invocation import InvocationContext, RunStatus
from runtime.replay import HeadScan
from runtime.replay._children import child_confirmation_ids
from runtime.replay._resume import waiting_since

__all__ = ["Ending", "at_step_limit", "settled", "stopped"]


@dataclass(kw_only=True)
class Ending:
    """How an invocation ended, filled as it goes; the runner's ``RunResult`` says it."""

    status: RunStatus = "completed"
    final_text: str = ""
    pending: tuple[str, ...] = ()
    reason: str | None = None


def at_step_limit(ctx: InvocationContext, ending: Ending) -> bool:
    """Decide whether the agent has made its ``max_steps`` model calls in this invocation; fill
    ``ending`` when it has (the next run continues from the log)."""
    limit = ctx.agent.max_steps
    if ctx.step < limit:
        return False
    ending.status = "step_limit"
    ending.reason = (
        f"Agent {ctx.agent.name!r} made {ctx.step} model calls in invocation "
        f"{ctx.invocation_id!r} without a final response (max_steps={limit}); run the session "
        "again to continue."
    )
    return True


async def settled(ctx: InvocationContext, ending: Ending) -> bool:
    """Decide whether the run has nothing to ask the model now; fill ``ending`` when so.

    The decision is ``runtime.replay.HeadScan``'s (the one ``pending()`` reports).
    """
    scan = HeadScan(agent_name=ctx.agent.name)
    async for event in ctx.events_newest_first():
        if not scan.feed(event):
            break
    head = scan.result()
    if head.status is None:
        return False
    if head.status == "completed":
        ending.final_text = head.final_text
        return True
    if head.status == "escalated":
        ending.status, ending.reason = "escalated", head.reason
        return True
    ending.status = head.status
    ending.pending = head.waiting
    ending.reason = (f"Session {ctx.session_id!r} still waits for the answer to "
                     f"{', '.join(head.waiting)}; {waiting_since(head)}")
    return True


async def stopped(ctx: InvocationContext, step: StepExecution, ending: Ending) -> bool:
    """Decide whether the invocation ends after a step; fill ``ending`` when it does.

    A call left open because its ``AgentTool`` child waits for confirmations pauses the
    invocation for those confirmations (read from the child's log): their ids are what
    ``answer_confirmation`` accepts on this session.
    """
    if step.dropped_call_ids:
        ending.status = "stale"
        ending.pending = ()
        ending.reason = (
            f"Invocation {ctx.invocation_id!r} is stale: another writer answered call(s) "
            f"{', '.join(step.dropped_call_ids)} first, so its answers were dropped and it "
            f"appends nothing more to session {ctx.session_id!r}."
        )
        return True
    asked_by_children: tuple[str, ...] = ()
    if step.pending_call_ids:
        asked_by_children = await child_confirmation_ids(
            ctx.store, ctx.session_id, step.pending_call_ids, app_name=ctx.app_name,
            user_id=ctx.user_id)
    if step.confirmation_call_ids or asked_by_children:
        ending.status = "paused_for_confirmation"
        ending.pending = (*step.confirmation_call_ids, *asked_by_children)
        ending.reason = (
            f"Invocation {ctx.invocation_id!r} waits for the answer to confirmation request(s) "
            f"{', '.join(ending.pending)}"
            + (" (asked in the child sessions of its agent-tool calls; answer them through "
               "this session)." if asked_by_children else ".")
        )
        return True
    if step.pending_call_ids:
        ending.status = "paused_long_running"
        ending.pending = step.pending_call_ids
        ending.reason = (
            f"Invocation {ctx.invocation_id!r} waits for the response(s) of call(s) "
            f"{', '.join(step.pending_call_ids)}."
        )
        return True
    if step.escalated:
        ending.status = "escalated"
        ending.reason = escalation_reason(ctx.invocation_id, step.outcomes)
        return True
    if step.skip_summarization:
        ending.final_text = step.display_text
        return True
    return False
