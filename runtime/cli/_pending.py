"""``evs pending``: what a session is waiting for and why, as the runtime sees it.

The report is ``runtime.replay.pending`` — a pure function of the log, made of the decision the
runner itself makes — and each item carries the ``evs`` command that unblocks it. Whether a
started call is re-run depends on whether its tool is idempotent: the CLI knows it for the demo
agent's sessions, for an agent an installed package registered under the session's app name
(entry-point group ``agent_eventstore.agents``) and for the tools named with ``--idempotent``;
otherwise it says "unknown".
The database is opened read-only.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Annotated, Any

import typer

from eventstore import EventStore
from eventstore.commands import (
    DEFAULT_DB,
    AppOption,
    DbOption,
    JsonOption,
    UserOption,
    confirm_command,
    console,
    open_existing,
    print_json,
    printable,
    prog,
    run,
    shared_address,
    short_json,
)
from runtime import Agent
from runtime.replay import PendingReport, session_pending
from runtime.tools import is_idempotent

from ._claims import describe_claim
from ._demo import DEMO_APP
from ._demo_agent import demo_idempotent_tools
from ._words import command_words

__all__ = [
    "AGENTS_ENTRY_POINTS",
    "pending",
    "pending_payload",
    "registered_agent_idempotent_tools",
]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                           metavar="SESSION_ID")]


IdempotentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--idempotent",
        help="Name a tool of the session's agent that is idempotent (repeatable). Given at "
        "least once, every other tool counts as not idempotent; without it, a crashed call "
        "is reported as 'unknown: depends on whether TOOL is idempotent' (the demo agent's "
        "tools are known).",
        show_default=False,
    ),
]


AGENTS_ENTRY_POINTS = "agent_eventstore.agents"
"""Entry-point group where an app registers its agent under the app's name, e.g. in its
pyproject: ``[project.entry-points."agent_eventstore.agents"] weather = "myapp.agents:agent"``
(an ``Agent``, or a callable returning one), so ``evs pending`` knows its tools."""


def registered_agent_idempotent_tools(app_name: str) -> list[str] | None:
    """The idempotent tools of the agent an installed package registered for ``app_name``;
    ``None`` when none is registered or its tools are not all known without running it
    (toolsets are resolved per request)."""
    found = entry_points(group=AGENTS_ENTRY_POINTS, name=app_name)
    if not found:
        return None
    target = next(iter(found)).load()
    agent = target if isinstance(target, Agent) else target() if callable(target) else None
    if not isinstance(agent, Agent) or agent.toolsets:
        return None
    return sorted(tool.name for tool in agent.tools if is_idempotent(tool))


def _tool_knowledge(app_name: str, idempotent: list[str] | None) -> list[str] | None:
    """The idempotent tools of the agent that runs this session, when the CLI knows them:
    ``--idempotent``, the demo agent, or the agent an installed package registered."""
    if idempotent:
        return list(idempotent)
    if app_name == DEMO_APP:
        return demo_idempotent_tools()
    return registered_agent_idempotent_tools(app_name)


def pending(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
    idempotent: IdempotentOption = None,
    app: AppOption = None,
    user: UserOption = None,
) -> None:
    """Show what the session is waiting for and why: confirmations, long-running calls,
    calls in doubt, calls the next run executes, and what the next run does."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            payload = await pending_payload(store, session_id, db=db, idempotent=idempotent,
                                            app_name=app, user_id=user)
        items, next_run = payload["pending"], payload["next_run"]
        if json:
            print_json(payload)
            return
        out = console()
        for bad in payload["untrusted"]:
            out.print(printable(f"#{bad['seq']}  {bad['problem'].replace('_', ' ')}: "
                                f"{bad['reason']}", newlines=False), style="bold")
        if not items:
            out.print(printable(f"Nothing is pending in session {session_id}."))
            return
        for item in items:
            label = item["kind"].replace("_", " ")
            if item["session_id"] != session_id:
                label = f"{label} (child session {item['session_id']})"
            out.print(printable(f"#{item['seq']}  {label}: {item['tool']}"
                                f"({short_json(item['args'])})  [{item['call_id']}]",
                                newlines=False), style="bold")
            if item["hint"]:
                out.print(printable(f"      hint: {item['hint']}", newlines=False))
            out.print(printable(f"      {item['reason']}", newlines=False))
            if item["claim"]:
                out.print(printable(f"      {describe_claim(item['claim'])}", newlines=False))
            if item["command"]:
                out.print(printable(f"      {item['command']}", newlines=False))
        out.print(printable(f"Next run: {command_words(next_run['reason'])}", newlines=False))

    run(main())


async def pending_payload(
    store: EventStore, session_id: str, *, db: str, idempotent: list[str] | None = None,
    app_name: str | None = None, user_id: str | None = None,
    words: Callable[[str], str] = command_words,
) -> dict[str, Any]:
    """What ``evs pending --json`` prints for ``session_id`` (of ``app_name``'s ``user_id``
    when given): ``runtime.replay.session_pending`` — the session's items and those of its
    paused children — each with the command that answers it (naming ``--app``/``--user`` when
    other sessions hold the id too), and the next run. ``words`` rewrites each item's reason
    (by default the runtime's functions become ``evs`` commands; ``evs web`` words its own)."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    knowledge = _tool_knowledge(info.app_name, idempotent)
    report = await session_pending(store, session_id, idempotent_tools=knowledge,
                                   app_name=info.app_name, user_id=info.user_id)
    items = _pending_items(report, db=db, session_id=session_id,
                           address=await shared_address(store, info), words=words)
    next_run = {
        "executes": list(report.next_run.executes),
        "step": report.next_run.step,
        "reason": report.next_run.reason,
    }
    untrusted = [{"seq": u.seq, "problem": u.problem, "reason": u.reason}
                 for u in report.untrusted]
    return {"session_id": session_id, "pending": items, "next_run": next_run,
            "untrusted": untrusted}


def _pending_items(report: PendingReport, *, db: str, session_id: str, address: str,
                   words: Callable[[str], str] = command_words) -> list[dict[str, Any]]:
    """The runtime's pending report (``runtime.replay.pending``) as JSON-ready mappings, each
    with the ``evs`` command that unblocks it (``address``: ``address_flags``)."""
    flag = ("" if db == DEFAULT_DB else f" --db {shlex.quote(db)}") + address
    items: list[dict[str, Any]] = []
    for entry in report:
        where = entry.session_id or session_id
        respond = f"{prog()} respond{flag} {shlex.quote(where)}"
        command: str | None = None
        if entry.kind == "confirmation" and entry.confirmation_id:
            command = (f"{confirm_command(db, where, address=address)} "
                       f"{entry.confirmation_id} --yes   (or --no)")
        elif entry.kind == "long_running":
            command = f"{respond} {entry.call.id} --result '{{...}}'"
        elif entry.kind == "in_doubt" or entry.kind == "idempotency_unknown":
            rerun = f"{prog()} rerun{flag} {shlex.quote(where)} {entry.call.id}"
            command = (f"{rerun}   (it did not happen: run it again)   or   "
                       f"{respond} {entry.call.id} --result '{{...}}'   (it happened: record "
                       "it)")
        items.append({
            "session_id": where,
            "kind": entry.kind,
            "seq": entry.seq,
            "agent": entry.agent,
            "call_id": entry.call.id,
            "tool": entry.call.name,
            "args": entry.call.args,
            "confirmation_id": entry.confirmation_id,
            "hint": entry.hint,
            "reason": words(entry.reason),
            "command": command,
            "claim": entry.claim,
        })
    return items
