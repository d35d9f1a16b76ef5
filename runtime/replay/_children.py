"""What a session waits for, children included: the ``pending()`` report read from the store.

An ``AgentTool`` call whose child paused stays open in the parent (no response, docs/protocol.md
§10); what someone must answer lives in the child session. ``session_pending`` is the report a
caller of the parent needs: the parent's own ``pending()`` report with the items of the child
sessions of its open calls merged in (``PendingCall.session_id`` names where each lives), each
answerable through the parent (the answer APIs route an id to the child that has it). The
rules, on top of ``pending()``'s:

- a child's items join the parent's groups as they are (a child confirmation is a
  ``confirmation`` item with the child's original call, its tool, args and hint);
- the parent's own item for the open call itself (``will_rerun`` / ``idempotency_unknown``) is
  left out: the next run re-runs it (an ``AgentTool`` is idempotent) only to continue the child;
- the next run: when it re-runs a call whose child executes nothing and waits (or pauses), the
  call has no result after that step, so the parent's next run waits too (``NextRun.step``
  ``waits``), naming what the child waits for.

``child_confirmation_ids`` is the same reading for the runner: the ids of the confirmation
requests the children of a step's open calls wait for, so a parent paused by a child says
``paused_for_confirmation`` with ids ``answer_confirmation`` accepts on the parent session.
Reads only; children nested deeper than ``MAX_CHILD_DEPTH`` are not followed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence

from eventstore import Event, EventStore, SessionNotFoundError

from ._compacted import decision_log
from ._log import PARENT_LINK_KEY, child_session_id, settled_response_ids
from ._pending import NextRun, PendingCall, PendingReport, pending

__all__ = [
    "MAX_CHILD_DEPTH",
    "child_confirmation_ids",
    "linked_child",
    "open_children",
    "session_pending",
]

MAX_CHILD_DEPTH = 8
"""How many levels of ``AgentTool`` children are followed below a session."""


async def linked_child(
    store: EventStore, session_id: str, call_id: str, *, app_name: str | None = None,
    user_id: str | None = None,
) -> str | None:
    """The id of the ``AgentTool`` child session of call ``call_id`` of ``session_id``, when
    one exists and its link names that parent; else ``None``. A child belongs to its parent's
    app and user: ``app_name``/``user_id`` (the parent's) address it."""
    child = child_session_id(session_id, call_id)
    try:
        first = await store.read(child, limit=4, app_name=app_name, user_id=user_id)
    except SessionNotFoundError:
        return None
    link = next((e.custom_metadata.get(PARENT_LINK_KEY) for e in first
                 if PARENT_LINK_KEY in e.custom_metadata), None)
    if isinstance(link, Mapping) and link.get("session_id") == session_id:
        return child
    return None


async def open_children(
    store: EventStore, session_id: str, *, events: Sequence[Event] | None = None,
    app_name: str | None = None, user_id: str | None = None,
) -> list[tuple[str, str]]:
    """``(call id, child session id)`` of the session's open ``AgentTool`` calls (started, no
    settled response), in call order: where a paused child's pending items live. ``events``:
    the session's log when the caller has read it already; ``app_name``/``user_id`` address
    the session (and its children, which share them)."""
    if events is None:
        events = await store.read(session_id, app_name=app_name, user_id=user_id)
    settled = {cid for e in events for cid in settled_response_ids(e)}
    started = {cid for e in events for cid in e.started_call_ids}
    children: list[tuple[str, str]] = []
    for event in events:
        for call in event.function_calls():
            if call.id in settled or call.id not in started:
                continue
            child = await linked_child(store, session_id, call.id, app_name=app_name,
                                       user_id=user_id)
            if child is not None:
                children.append((call.id, child))
    return children


async def session_pending(
    store: EventStore,
    session_id: str,
    *,
    idempotent_tools: Collection[str] | None = None,
    agent_name: str | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
) -> PendingReport:
    """Return ``pending()`` of the session read from ``store``, its children's items merged in.

    ``idempotent_tools`` and ``agent_name`` as for ``pending()`` (the same knowledge is used for
    the children's agents); the session's untrusted events (a keyed store) are reported as
    there. See the module docstring for the merge rules. ``app_name``/``user_id`` pick the
    session when several apps or users hold its id. Raises ``SessionNotFoundError``,
    ``AmbiguousSessionError`` (an id several hold, not picked).
    """
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    return await _session_pending(store, session_id, idempotent_tools, agent_name, depth=0,
                                  where=(info.app_name, info.user_id))


async def _session_pending(
    store: EventStore,
    session_id: str,
    idempotent_tools: Collection[str] | None,
    agent_name: str | None,
    *,
    depth: int,
    where: tuple[str, str],
) -> PendingReport:
    app_name, user_id = where
    # A compacted session is read from its newest compaction on (runtime.replay._compacted):
    # nothing at or below the compaction's range is open, so the report is the same.
    events, _ = await decision_log(store, session_id, agent_name=agent_name,
                                   app_name=app_name, user_id=user_id)
    children = (await open_children(store, session_id, events=events, app_name=app_name,
                                    user_id=user_id)
                if depth < MAX_CHILD_DEPTH else [])
    # A call with a linked child is an AgentTool call, and an AgentTool is idempotent.
    open_calls = {call_id for call_id, _ in children}
    agent_tools = sorted({c.name for e in events for c in e.function_calls() if c.id in open_calls})
    first = events[0].seq if events and events[0].seq is not None else 1
    untrusted = (await store.untrusted(session_id, after=first - 1 if first > 1 else None,
                                       app_name=app_name, user_id=user_id)
                 if depth == 0 else None)
    report = pending(events, idempotent_tools=idempotent_tools, agent_name=agent_name,
                     untrusted=untrusted, also_idempotent=agent_tools)
    if not children:
        return report
    reports = [
        (call_id, child,
         await _session_pending(store, child, idempotent_tools, None, depth=depth + 1,
                                where=where))
        for call_id, child in children
    ]
    return _merged(report, reports)


def _in_child(items: Iterable[PendingCall], child: str) -> tuple[PendingCall, ...]:
    return tuple(item if item.session_id is not None else dataclasses.replace(
        item, session_id=child) for item in items)


def _merged(
    report: PendingReport, children: list[tuple[str, str, PendingReport]]
) -> PendingReport:
    open_calls = {call_id for call_id, _, _ in children}

    def own(items: tuple[PendingCall, ...]) -> tuple[PendingCall, ...]:
        return tuple(
            item for item in items
            if not (item.call.id in open_calls and item.session_id is None
                    and item.kind in ("will_rerun", "idempotency_unknown"))
        )

    merged = dataclasses.replace(
        report,
        unanswered=own(report.unanswered),
        in_doubt=own(report.in_doubt),
    )
    for _, child, sub in children:
        merged = dataclasses.replace(
            merged,
            unanswered=merged.unanswered + _in_child(sub.unanswered, child),
            confirmations=merged.confirmations + _in_child(sub.confirmations, child),
            long_running=merged.long_running + _in_child(sub.long_running, child),
            in_doubt=merged.in_doubt + _in_child(sub.in_doubt, child),
            not_acted_on=merged.not_acted_on + _in_child(sub.not_acted_on, child),
        )
    return dataclasses.replace(merged, next_run=_next_run(report.next_run, children))


def _next_run(parent: NextRun, children: list[tuple[str, str, PendingReport]]) -> NextRun:
    waiting = [
        (call_id, child, sub.next_run)
        for call_id, child, sub in children
        if call_id in parent.executes and sub.next_run.step in ("waits", "pauses")
    ]
    if not waiting or parent.step == "unknown":
        return parent
    what = "; ".join(
        f"call {call_id!r} continues child session {child!r}, where {_lowered(run.reason)}"
        for call_id, child, run in waiting
    )
    return NextRun(
        executes=parent.executes,
        step="waits",
        reason=f"The next run executes {', '.join(parent.executes)}, then waits: {what}",
    )


def _lowered(reason: str) -> str:
    return reason[:1].lower() + reason[1:] if reason.startswith("The ") else reason


async def child_confirmation_ids(
    store: EventStore, session_id: str, call_ids: Iterable[str], *, app_name: str,
    user_id: str,
) -> tuple[str, ...]:
    """Ids of the open confirmation requests the ``AgentTool`` children of ``call_ids`` (and
    their children) wait for, in call order; ``answer_confirmation`` accepts each on
    ``session_id`` (of ``app_name``'s ``user_id``). Empty when none of the calls has a child
    that waits for a confirmation."""
    ids: list[str] = []
    for call_id in call_ids:
        child = await linked_child(store, session_id, call_id, app_name=app_name,
                                   user_id=user_id)
        if child is None:
            continue
        report = await _session_pending(store, child, None, None, depth=1,
                                        where=(app_name, user_id))
        ids += [item.confirmation_id for item in report.confirmations
                if item.confirmation_id is not None]
    return tuple(dict.fromkeys(ids))
