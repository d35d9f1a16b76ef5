"""``evs pending``: what a session is waiting for and why, as the runtime sees it.

The report is ``runtime.replay.pending`` — a pure function of the log — and each item carries
the ``evs`` command that unblocks it. The database is opened read-only.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer

from eventstore import Event
from eventstore.cli import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    confirm_command,
    console,
    open_existing,
    print_json,
    printable,
    prog,
    run,
    short_json,
)
from runtime.replay import pending as runtime_pending

from ._words import command_words

__all__ = ["pending"]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                           metavar="SESSION_ID")]


def pending(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Show what the session is waiting for and why: confirmations, long-running calls,
    calls in doubt, calls the next run executes."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            events = await store.read(session_id)
        items = _pending_items(events, db=db, session_id=session_id)
        if json:
            print_json({"session_id": session_id, "pending": items})
            return
        out = console()
        if not items:
            out.print(printable(f"Nothing is pending in session {session_id}."))
            return
        for item in items:
            label = item["kind"].replace("_", " ")
            out.print(printable(f"#{item['seq']}  {label}: {item['tool']}"
                                f"({short_json(item['args'])})  [{item['call_id']}]",
                                newlines=False), style="bold")
            if item["hint"]:
                out.print(printable(f"      hint: {item['hint']}", newlines=False))
            out.print(printable(f"      {item['reason']}", newlines=False))
            if item["command"]:
                out.print(printable(f"      {item['command']}", newlines=False))

    run(main())


def _pending_items(events: list[Event], *, db: str, session_id: str) -> list[dict[str, Any]]:
    """The runtime's pending report (``runtime.replay.pending``) as JSON-ready mappings, each
    with the ``evs`` command that unblocks it."""
    flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
    respond = f"{prog()} respond{flag} {shlex.quote(session_id)}"
    items: list[dict[str, Any]] = []
    for entry in runtime_pending(events):
        command: str | None = None
        if entry.kind == "confirmation" and entry.confirmation_id:
            command = f"{confirm_command(db, session_id)} {entry.confirmation_id} --yes   (or --no)"
        elif entry.kind == "long_running":
            command = f"{respond} {entry.call.id} --result '{{...}}'"
        elif entry.kind == "in_doubt":
            rerun = f"{prog()} rerun{flag} {shlex.quote(session_id)} {entry.call.id}"
            command = (f"{rerun}   (it did not happen: run it again)   or   "
                       f"{respond} {entry.call.id} --result '{{...}}'   (it happened: record "
                       "it)")
        items.append({
            "kind": entry.kind,
            "seq": entry.seq,
            "agent": entry.agent,
            "call_id": entry.call.id,
            "tool": entry.call.name,
            "args": entry.call.args,
            "confirmation_id": entry.confirmation_id,
            "hint": entry.hint,
            "reason": command_words(entry.reason),
            "command": command,
        })
    return items
