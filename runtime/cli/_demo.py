"""``evs demo``: the main job, live — a weather agent on the embedded SQLite store.

The agent is the real runtime (``runtime.Runner`` with the replay resume planner) driven by a
``ScriptedModel``; every line printed is an event the runtime appended, read back from the log.
The run pauses on a paid call that needs a human's confirmation and prints the ``evs confirm``
command; ``--approve`` answers it in-process, or any other process may (then
``evs demo --resume SESSION`` continues). A long-running call is answered later through the
respond API (``runtime.replay.submit_response``), as a webhook would.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Annotated

import orjson
import typer

from eventstore import Event, EventStore, open_store
from eventstore.cli import (
    DEFAULT_DB,
    CliError,
    DbOption,
    JsonOption,
    analyze,
    confirm_command,
    console,
    event_entry,
    print_event,
    run,
)
from runtime import AgentRuntimeError, Model
from runtime.replay import answer_confirmation, pending, submit_response

from ._demo_agent import demo_idempotent_tools, demo_runner, model_turns, script
from ._demo_model import MODEL_HELP, demo_model, finished

__all__ = ["DEMO_APP", "DEMO_USER", "demo"]

DEMO_APP = "weather-demo"
"""App name of the demo's sessions."""

DEMO_USER = "demo-user"
"""User of the demo's sessions."""

QUESTION = ("What's the weather in Paris and in Atlantis? Then get me the detailed paid "
            "forecast for Paris and the long-range outlook, and summarize the report.")
_LIVE_ROUNDS = 8  # a live model that never answers finally must not loop forever
OUTLOOK = {"city": "Paris", "outlook": "warmer than usual for the next 30 days",
           "source": "seasonal-model"}


class _Printer:
    """Prints events as they land, pairing them with everything printed before."""

    def __init__(self, *, db: str, session_id: str, json: bool, seen: list[Event]) -> None:
        self.out = console()
        self.json = json
        self.seen = seen
        self.confirm = confirm_command(db, session_id)

    def event(self, event: Event) -> None:
        self.seen.append(event)
        timeline = analyze(self.seen)
        if self.json:
            typer.echo(orjson.dumps(event_entry(event, timeline)).decode())
        else:
            print_event(self.out, event, timeline, confirm_command=self.confirm, live=True)

    def note(self, text: str, *, style: str = "bold cyan") -> None:
        if not self.json:
            self.out.print(text, style=style)


async def _drive(store: EventStore, printer: _Printer, session_id: str,
                 message: str | None, model: Model | None = None) -> None:
    runner = demo_runner(store, printer.seen, app_name=DEMO_APP, model=model)
    try:
        async for event in runner.run_events(session_id=session_id, user_id=DEMO_USER,
                                             new_message=message):
            printer.event(event)
    except AgentRuntimeError as exc:
        raise CliError(" ".join(str(exc).split())) from exc


def demo(
    db: DbOption = DEFAULT_DB,
    approve: Annotated[bool, typer.Option("--approve", help="Approve the paid call in-process "
                                          "and finish the session.")] = False,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this demo session "
                                               "(after evs confirm).")] = None,
    json: JsonOption = False,
    model: Annotated[str | None, typer.Option("--model", help=MODEL_HELP)] = None,
) -> None:
    """Run the weather agent demo on the store (schema created/upgraded as needed)."""

    async def main() -> str:
        live = demo_model(model)  # before the session exists: a missing key creates nothing
        try:
            return await session(live)
        finally:
            close = getattr(live, "aclose", None)
            if close is not None:
                await close()

    async def session(live: Model | None) -> str:
        async with await open_store(db, auto_upgrade=True) as store:
            if resume is None:
                session_id = f"demo-{uuid.uuid4().hex[:8]}"
                await store.create_session(app_name=DEMO_APP, user_id=DEMO_USER,
                                           session_id=session_id)
                seen: list[Event] = []
            else:
                session_id = resume
                info = await store.session_info(session_id)
                if info.app_name != DEMO_APP:
                    raise CliError(f"Session {session_id!r} is not a demo session (its app is "
                                   f"{info.app_name!r}).")
                seen = await store.read(session_id)
            printer = _Printer(db=db, session_id=session_id, json=json, seen=seen)
            printer.note(f"Session {session_id} in {store.url}")
            message: str | None = QUESTION if resume is None else None
            flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
            rounds = 0
            while True:
                report = pending(printer.seen, idempotent_tools=demo_idempotent_tools())
                if message is None and report.confirmations:
                    if not approve:
                        printer.note("Paused: a human must confirm the paid call.",
                                     style="bold yellow")
                        for item in report.confirmations:
                            printer.note(f"  {printer.confirm} {item.confirmation_id} --yes",
                                         style="bold")
                        printer.note(f"then continue with: evs demo{flag} --resume "
                                     f"{shlex.quote(session_id)}   (add --approve to approve "
                                     "and continue in one go)", style="")
                        return "paused_for_confirmation"
                    for item in report.confirmations:
                        assert item.confirmation_id is not None
                        printer.note(f"Approving {item.confirmation_id} (what evs confirm "
                                     "does):")
                        printer.event(await answer_confirmation(
                            store, session_id=session_id, confirmation_id=item.confirmation_id,
                            confirmed=True))
                elif message is None and report.long_running:
                    for item in report.long_running:
                        printer.note(f"Later, the outlook service answers {item.call.id} "
                                     "through the respond API (what evs respond does):")
                        printer.event(await submit_response(
                            store, session_id=session_id, call_id=item.call.id,
                            response=OUTLOOK))
                elif message is None and report.in_doubt:
                    raise CliError(f"Session {session_id!r} has calls in doubt; see evs "
                                   f"pending {session_id}.")
                elif message is None and (
                    model_turns(printer.seen) >= len(script()) if live is None
                    else finished(printer.seen)
                ):
                    printer.note(f"Done: session {session_id} is complete. Inspect it with "
                                 f"evs show{flag} {session_id}", style="bold green")
                    return "completed"
                elif live is not None and rounds >= _LIVE_ROUNDS:
                    raise CliError(f"The model did not finish session {session_id!r} in "
                                   f"{rounds} runs; see evs show {session_id}.")
                await _drive(store, printer, session_id, message, live)
                rounds += 1
                message = None

    status = run(main())
    if json:
        typer.echo(orjson.dumps({"status": status}).decode())
