"""``evs demo``: the main job, live — a weather agent on the embedded SQLite store.

The agent is the real runtime (``runtime.Runner`` with the replay resume planner) driven by a
``ScriptedModel``; every line printed is an event the runtime appended, read back from the log.
The run pauses on a paid call that needs a human's confirmation and prints the ``evs confirm``
command; ``--approve`` answers it in-process, or any other process may (then
``evs demo --resume SESSION`` continues). A long-running call is answered later through the
respond API (``runtime.replay.submit_response``), as a webhook would.

Each invocation's events are printed when it ends, with how it ended (``RunResult.status``): a
run that cannot move the session on (a planner pause, the step limit, nothing appended) ends the
command with its reason instead of looping. The session is created together with the question,
so a crash can never leave a demo session without it.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Annotated, Any

import typer

from eventstore import ConcurrencyError, Content, Event, EventStore, Part, open_store
from eventstore.commands import (
    DEFAULT_DB,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    UserOption,
    analyze,
    confirm_command,
    console,
    event_entry,
    print_event,
    print_json,
    prog,
    run,
    shared_address,
)
from eventstore.commands._common import refuse_directory
from runtime import AgentRuntimeError, CallAlreadyAnsweredError, Model, RunResult
from runtime.replay import answer_confirmation, pending, submit_response

from ._answer import refuse_damaged_log
from ._demo_agent import demo_idempotent_tools, demo_runner, model_turns, script
from ._demo_model import MODEL_HELP, demo_model, finished
from ._words import command_words

__all__ = ["DEMO_APP", "DEMO_USER", "demo"]

_LIVE_ROUNDS = 8  # a live model that never answers finally must not loop forever

DEMO_APP = "weather-demo"
"""App name of the demo's sessions."""

DEMO_USER = "demo-user"
"""User of the demo's sessions."""

QUESTION = ("What's the weather in Paris and in Atlantis? Then get me the detailed paid "
            "forecast for Paris and the long-range outlook, and summarize the report.")
OUTLOOK = {"city": "Paris", "outlook": "warmer than usual for the next 30 days",
           "source": "seasonal-model"}


class _Printer:
    """Prints events as they land, pairing them with everything printed before."""

    def __init__(self, *, db: str, session_id: str, json: bool, seen: list[Event],
                 address: str = "") -> None:
        self.out = console()
        self.json = json
        self.seen = seen
        self.confirm = confirm_command(db, session_id, address=address)

    def event(self, event: Event) -> None:
        self.seen.append(event)
        if not self.json:
            print_event(self.out, event, analyze(self.seen), confirm_command=self.confirm,
                        live=True)

    def note(self, text: str, *, style: str = "bold cyan") -> None:
        if not self.json:
            self.out.print(text, style=style)


async def _drive(
    store: EventStore, printer: _Printer, session_id: str, user_id: str, model: Model | None
) -> RunResult:
    runner = demo_runner(store, printer.seen, app_name=DEMO_APP, model=model)
    try:
        result = await runner.run(session_id=session_id, user_id=user_id)
    except AgentRuntimeError as exc:
        raise CliError(command_words(" ".join(str(exc).split()))) from exc
    for event in result.events:
        printer.event(event)
    return result


async def _catch_up(store: EventStore, printer: _Printer, session_id: str, user_id: str,
                    why: str) -> None:
    """Another process wrote to the session: print what it wrote, so the log on screen stays
    the log in the store."""
    newest = printer.seen[-1].seq if printer.seen else 0
    fresh = await store.read(session_id, after=newest, app_name=DEMO_APP, user_id=user_id)
    printer.note(f"{why}; continuing from the log ({len(fresh)} new event(s)).", style="yellow")
    for event in fresh:
        printer.event(event)


def _first_message() -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=QUESTION),)))


def demo(
    db: DbOption = DEFAULT_DB,
    approve: Annotated[bool, typer.Option("--approve", help="Approve the paid call in-process "
                                          "and finish the session.")] = False,
    resume: Annotated[str | None, typer.Option("--resume", metavar="SESSION_ID",
                                               help="Continue this demo session (after evs "
                                               "confirm).")] = None,
    json: JsonOption = False,
    model: Annotated[str | None, typer.Option("--model", help=MODEL_HELP)] = None,
    app: AppOption = None,
    user: UserOption = None,
) -> None:
    """Run the weather agent demo on the store (its schema is created or upgraded as needed).

    Every run status ends the command with its reason; --json prints one JSON object (session
    id, status, reason, the events appended, pending confirmation ids, the next command).
    --app/--user pick the session --resume names when other apps or users hold its id too."""
    me = prog()
    flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
    if resume is None and (app is not None or user is not None):
        raise typer.BadParameter("--app and --user pick the session of --resume; a new demo "
                                 f"session is always {DEMO_APP!r}'s, of user {DEMO_USER!r}.",
                                 param_hint="--app/--user")

    async def main() -> dict[str, Any]:
        refuse_directory(db)
        live = demo_model(model)  # before the session exists: a missing key creates nothing
        try:
            return await session(live)
        finally:
            close = getattr(live, "aclose", None)
            if close is not None:
                await close()

    async def session(live: Model | None) -> dict[str, Any]:
        async with await open_store(db, auto_upgrade=True) as store:
            user_id, address = DEMO_USER, ""
            if resume is None:
                session_id = f"demo-{uuid.uuid4().hex[:8]}"
                # Session and question land together: a crash right after creating the session
                # can never leave one whose resume runs the model without the user's message.
                session = await store.create_session(app_name=DEMO_APP, user_id=DEMO_USER,
                                                     session_id=session_id,
                                                     events=[_first_message()])
                seen: list[Event] = []
                printer = _Printer(db=db, session_id=session_id, json=json, seen=seen)
                printer.note(f"Session {session_id} in {store.url}")
                for event in session.events:
                    printer.event(event)
            else:
                session_id = resume
                info = await store.session_info(session_id, app_name=app, user_id=user)
                if info.app_name != DEMO_APP:
                    raise CliError(f"Session {session_id!r} is not a demo session (its app is "
                                   f"{info.app_name!r}).")
                user_id = info.user_id
                # Commands printed for an id others hold too must name this session.
                address = await shared_address(store, info)
                # Resuming answers the session (confirmation, long-running result, model
                # turns): the same refusal as evs confirm on a log evs verify flags.
                await refuse_damaged_log(store, session_id, command="demo",
                                         app_name=info.app_name, user_id=info.user_id)
                seen = await store.read(session_id, app_name=info.app_name,
                                        user_id=info.user_id)
                if not any(e.author == "user" and e.text() for e in seen):
                    raise CliError(f"Demo session {session_id!r} has no user message (it was "
                                   "created by an older evs that was stopped before the "
                                   f"question landed); start a new one with: {me} demo{flag}")
                printer = _Printer(db=db, session_id=session_id, json=json, seen=seen,
                                   address=address)
                printer.note(f"Session {session_id} in {store.url}")
            start = 0 if resume is None else len(seen)

            def outcome(status: str, reason: str, next_command: str | None) -> dict[str, Any]:
                report = pending(printer.seen, idempotent_tools=demo_idempotent_tools())
                return {"session_id": session_id, "status": status, "reason": reason,
                        "pending_confirmation_ids": [
                            p.confirmation_id for p in report.confirmations
                            if p.confirmation_id is not None],
                        "next_command": next_command,
                        "events": [event_entry(e, analyze(printer.seen))
                                   for e in printer.seen[start:]]}

            rounds = 0
            while True:
                report = pending(printer.seen, idempotent_tools=demo_idempotent_tools())
                before = len(printer.seen)
                if report.confirmations and not approve:
                    printer.note("Paused: a human must confirm the paid call.",
                                 style="bold yellow")
                    for item in report.confirmations:
                        printer.note(f"  {printer.confirm} {item.confirmation_id} --yes",
                                     style="bold")
                    resume_command = (f"{me} demo{flag}{address} "
                                      f"--resume {shlex.quote(session_id)}")
                    printer.note(f"then continue with: {resume_command}   (add --approve to "
                                 "approve and continue in one go)", style="")
                    return outcome("paused_for_confirmation",
                                   "A human must confirm the paid call.", resume_command)
                if report.confirmations:
                    for item in report.confirmations:
                        assert item.confirmation_id is not None
                        printer.note(f"Approving {item.confirmation_id} (what evs confirm "
                                     "does):")
                        try:
                            printer.event(await answer_confirmation(
                                store, session_id=session_id,
                                confirmation_id=item.confirmation_id, confirmed=True,
                                app_name=DEMO_APP, user_id=user_id))
                        except (CallAlreadyAnsweredError, ConcurrencyError):
                            await _catch_up(store, printer, session_id, user_id,
                                            f"Another process answered {item.confirmation_id} "
                                            "first")
                            break
                elif report.long_running:
                    for item in report.long_running:
                        printer.note(f"Later, the outlook service answers {item.call.id} "
                                     "through the respond API (what evs respond does):")
                        try:
                            printer.event(await submit_response(
                                store, session_id=session_id, call_id=item.call.id,
                                response=OUTLOOK, app_name=DEMO_APP, user_id=user_id))
                        except (CallAlreadyAnsweredError, ConcurrencyError):
                            await _catch_up(store, printer, session_id, user_id,
                                            f"Another process answered {item.call.id} first")
                            break
                elif report.in_doubt:
                    raise CliError(f"Session {session_id!r} has calls in doubt; see: {me} "
                                   f"pending{flag}{address} {shlex.quote(session_id)}")
                elif (model_turns(printer.seen) >= len(script()) if live is None
                      else finished(printer.seen)):
                    show_command = f"{me} show{flag}{address} {shlex.quote(session_id)}"
                    printer.note(f"Done: session {session_id} is complete. Inspect it with "
                                 f"{show_command}", style="bold green")
                    return outcome("completed", "The agent gave its final answer.",
                                   show_command)
                elif live is not None and rounds >= _LIVE_ROUNDS:
                    show_command = f"{me} show{flag}{address} {shlex.quote(session_id)}"
                    raise CliError(f"The model did not finish session {session_id!r} in "
                                   f"{rounds} runs; see: {show_command}")
                result = await _drive(store, printer, session_id, user_id, live)
                rounds += 1
                if result.status == "stale":
                    await _catch_up(store, printer, session_id, user_id, "Another process "
                                    "answered this run's calls first")
                    continue
                if result.status in ("paused_by_planner", "step_limit") or (
                    len(printer.seen) == before
                ):
                    # Nothing this process can do moves the session on: say why and stop
                    # (looping would run the same invocation forever).
                    reason = " ".join((result.pause_reason or
                                       f"the run ended ({result.status}) without appending "
                                       "anything").split())
                    pending_command = f"{me} pending{flag}{address} {shlex.quote(session_id)}"
                    printer.note(f"Stopped: {reason} See: {pending_command}",
                                 style="bold yellow")
                    return outcome(result.status, reason, pending_command)

    summary = run(main())
    if json:
        print_json(summary)
