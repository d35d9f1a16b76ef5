"""The replay resume planner plugged into the loop (``Runner(resume_planner=...)``).

Thin I/O edge over the pure ``ResumeScan``: it feeds the lazily read newest-first events and
turns the decision into the loop's ``ResumePlan``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from eventstore import Event
from runtime._invocation import InvocationContext, PlannedCall, ResumePlan
from runtime.tools import is_idempotent

from ._resume import ResumeDecision, ResumeScan, plan_resume

__all__ = ["ReplayResumePlanner", "decide"]


async def decide(
    ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
) -> ResumeDecision:
    """Return the full resume decision for ``ctx``'s agent, reading events only as needed."""
    tools = await ctx.resolve_tools()
    idempotent = sorted(name for name, tool in tools.items() if is_idempotent(tool))
    scan = ResumeScan(agent_name=ctx.agent.name, idempotent_tools=idempotent)
    read: list[Event] = []
    try:
        async for event in events_newest_first:
            read.append(event)
            if not scan.feed(event):
                break
    finally:
        close = getattr(events_newest_first, "aclose", None)
        if close is not None:
            await close()
    seqs = [e.seq for e in read if e.seq is not None]
    if not seqs:
        return scan.result()
    # A keyed store names the events it cannot vouch for (an unkeyed one answers {} without
    # I/O); the scan is pure, so it is simply run again over the same events knowing them.
    untrusted = await ctx.store.untrusted(ctx.session_id, after=min(seqs) - 1, upto=max(seqs),
                                          app_name=ctx.app_name, user_id=ctx.user_id)
    if not untrusted:
        return scan.result()
    return plan_resume(read, agent_name=ctx.agent.name, idempotent_tools=idempotent,
                       untrusted=untrusted)


class ReplayResumePlanner:
    """Dedup, crash recovery and confirmation recovery for ``Runner``.

    Guarantees: a call with a response in the log is never planned; a started, unanswered call is
    planned again only when its tool is idempotent or a human decided a re-run (``rerun_call``);
    any other started call pauses the invocation with a reason naming it; confirmed calls run with
    their stored arguments and the human's ``ToolConfirmation``; refused answers pause with the
    refusal reasons; with a keyed store, nothing is executed when an event the plan read has a
    missing or wrong signature (the invocation pauses naming it). Two runners resuming the same
    session each plan the call, but only the one whose claim lands first (``expected_version``)
    runs it. The log cannot tell a live claim from
    a crashed one, so an idempotent call another process is still running may run again here;
    both runs' answers are offered, and only the first to land is appended (``run_claimed``).
    """

    async def plan(
        self, ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
    ) -> ResumePlan:
        """Return the loop's plan for this invocation (calls first, then maybe a pause)."""
        decision = await decide(ctx, events_newest_first)
        return ResumePlan(
            calls=tuple(
                PlannedCall(call=step.call, confirmation=step.confirmation)
                for step in decision.execute
            ),
            pause_reason=decision.pause_reason,
        )
