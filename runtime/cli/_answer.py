"""Answering a paused session from the command line: ``confirm``, ``respond`` and ``rerun``.

All go through the runtime's public answer APIs (``runtime.replay.answer_confirmation``,
``submit_response`` and ``rerun_call``), so the CLI applies exactly the library's checks: the
call exists, it was made by an agent, it is still unanswered, and the append is checked against
the version read.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import orjson
import typer

from eventstore import Event, EventStore, InvalidEventError, check_json_value
from eventstore.commands import (
    DEFAULT_DB,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    UserOption,
    analyze,
    errors,
    open_existing,
    print_json,
    printable,
    prog,
    run,
    shared_address,
    short_json,
    verify_session,
)
from runtime import AgentRuntimeError
from runtime.replay import answer_confirmation, rerun_call, submit_response

from ._claims import DEFAULT_RERUN_MIN_AGE
from ._words import command_words

__all__ = ["confirm", "parse_json_option", "refuse_damaged_log", "rerun", "respond"]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                           metavar="SESSION_ID")]


def parse_json_option(option: str, value: str) -> Any:
    """Decode the JSON given to ``option`` (``-`` reads it from stdin) exactly as the log will
    carry it; CliError (one line, naming the path) when malformed, nested too deep, or holding
    an integer outside the 64-bit range (never silently changed into a float)."""
    text = sys.stdin.read() if value == "-" else value
    try:
        # orjson first: it refuses NaN/Infinity and bounds the depth without recursing.
        fast = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}.") from exc
    try:
        check_json_value(fast, path=option)
        # orjson reads integers past 64 bits as floats; the standard parser keeps them exact
        # (safe to recurse now that the depth is bounded), so the check can refuse them.
        exact = json.loads(text)
        check_json_value(exact, path=option)
    except InvalidEventError as exc:
        raise CliError(str(exc)) from exc
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise CliError(f"{option} holds a value the log cannot carry: {exc}.") from exc
    return exact


async def refuse_damaged_log(
    store: EventStore, session_id: str, *, command: str, app_name: str | None = None,
    user_id: str | None = None,
) -> None:
    """Raise CliError when ``evs verify`` finds anything wrong with the session's log: the one
    rule of every command that answers (``confirm``, ``respond``, ``rerun``, ``demo``), which
    append nothing to a damaged log (an answer would bury the evidence under a new event).
    ``app_name``/``user_id`` pick the session as ``--app``/``--user`` do."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    findings = await verify_session(store, session_id, app_name=info.app_name,
                                    user_id=info.user_id)
    if findings:
        first = findings[0]
        where = f"seq {first.seq}" if first.seq is not None else "the session"
        address = await shared_address(store, info)
        raise CliError(
            f"Session {session_id!r} has {len(findings)} integrity problem(s) ({where}: "
            f"{first.code}: {first.message}); {prog()} {command} appends nothing to a damaged "
            f"log. See: {prog()} verify{address} {shlex.quote(session_id)}"
        )


async def _answer(
    db: str, session_id: str, call_id: str, *, command: str, app_name: str | None,
    user_id: str | None, work: Callable[[EventStore, str, str], Awaitable[Event]],
) -> Event:
    """Check the log of the session (``--app``/``--user`` pick it), then run ``work`` with the
    store and the session's app and user."""
    async with await open_existing(db, read_only=False) as store:
        info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
        app, user = info.app_name, info.user_id
        await refuse_damaged_log(store, session_id, command=command, app_name=app,
                                 user_id=user)
        _check_target(await store.read(session_id, app_name=app, user_id=user), db=db,
                      session_id=session_id, call_id=call_id, command=command,
                      address=await shared_address(store, info))
        try:
            return await work(store, app, user)
        except AgentRuntimeError as exc:
            raise CliError(command_words(" ".join(str(exc).split()))) from exc


def _check_target(events: list[Event], *, db: str, session_id: str, call_id: str,
                  command: str, address: str) -> None:
    """Point to the right command when ``call_id`` is not what ``command`` answers."""
    timeline = analyze(events)
    record = timeline.calls.get(call_id)
    if record is None:
        return  # the runtime's own check names the problem
    s = shlex.quote(session_id)
    flag = ("" if db == DEFAULT_DB else f" --db {shlex.quote(db)}") + address
    if command != "confirm" and record.is_confirmation:
        raise CliError(f"{call_id!r} is a confirmation request: answer it with {prog()} "
                       f"confirm{flag} {s} {call_id} --yes (or --no).")
    if command == "confirm" and not record.is_confirmation:
        waiting = [c for c in record.confirmation_ids
                   if timeline.confirmations[c].answer_seq is None]
        hint = (f" It waits for confirmation {waiting[0]}: {prog()} confirm{flag} {s} "
                f"{waiting[0]} --yes (or --no)." if waiting else
                f" Record its result with {prog()} respond{flag} {s} {call_id} --result "
                "'{...}'.")
        raise CliError(f"{call_id!r} is a function call, not a confirmation request.{hint}")
    if command == "confirm" or record.is_confirmation:
        return
    # Where the call stands is the one classification ``evs show`` and ``evs pending`` use.
    status = timeline.status(call_id)
    found = timeline.confirmation_of(call_id)
    asked = found.confirmation_id if found else None
    want = "result" if command == "respond" else "re-run decision"
    see = f"See: {prog()} pending{flag} {s}"
    if status == "awaiting_confirmation":
        raise CliError(f"Call {call_id!r} waits for a human's confirmation, not for a "
                       f"{want}: {prog()} confirm{flag} {s} {asked} --yes (or --no).")
    if status == "confirmed_not_run":
        raise CliError(f"Call {call_id!r} was confirmed (confirmation {asked}) and has not run "
                       f"yet: the agent's next run executes it, so it takes no {want}. {see}")
    if status == "rejected_not_run":
        raise CliError(f"Call {call_id!r} was rejected (confirmation {asked}): the agent's next "
                       f"run answers it with the rejection and does not run the tool, so it "
                       f"takes no {want}. {see}")
    if status == "superseded":
        raise CliError(f"Call {call_id!r} does not run: a newer user message superseded its "
                       f"confirmation {asked}, so it takes no {want}. {see}")
    if status == "refused":
        raise CliError(f"Call {call_id!r} does not run: the answer to confirmation {asked} is "
                       "refused (the request is not its agent's, or embeds other arguments than "
                       f"the call as stored), so it takes no {want}. {see}")


def confirm(
    session_id: SessionArg,
    confirmation_id: Annotated[str, typer.Argument(help="Id of the confirmation request "
                                                   "(see evs pending).", show_default=False,
                                                   metavar="CONFIRMATION_ID")],
    decision: Annotated[bool | None, typer.Option("--yes/--no", help="Approve or reject the "
                                                  "call.", show_default=False)] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="JSON passed along with the "
                                                "answer ('-' reads stdin).",
                                                metavar="JSON")] = None,
    db: DbOption = DEFAULT_DB,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Approve (--yes) or reject (--no) a call that waits for confirmation.

    The agent runs (or rejects) the original call on its next run."""
    if decision is None:
        raise typer.BadParameter("give --yes to approve or --no to reject.",
                                 param_hint="'--yes' / '--no'")
    with errors():
        data = parse_json_option("--payload", payload) if payload is not None else None

    async def main() -> Event:
        return await _answer(db, session_id, confirmation_id, command="confirm",
                             app_name=app, user_id=user,
                             work=lambda store, app_name, user_id: answer_confirmation(
            store, session_id=session_id, confirmation_id=confirmation_id, confirmed=decision,
            payload=data, app_name=app_name, user_id=user_id))

    event = run(main())
    verdict = "approved" if decision else "rejected"
    if json:
        print_json({"session_id": session_id, "confirmation_id": confirmation_id,
                    "confirmed": decision, "payload": data, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(printable(f"Confirmation {confirmation_id} of session {session_id} "
                             f"{verdict} (seq {event.seq}); the agent acts on it on its next "
                             "run."))


def respond(
    session_id: SessionArg,
    call_id: Annotated[str, typer.Argument(help="Id of the pending call (see evs pending).",
                                           show_default=False, metavar="CALL_ID")],
    result: Annotated[str, typer.Option("--result", help="The call's result: a JSON object "
                                        "('-' reads stdin).", show_default=False,
                                        metavar="JSON")],
    db: DbOption = DEFAULT_DB,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Submit the result of a long-running (or in-doubt) call.

    --result is the result itself (a JSON object); --json prints the outcome as JSON."""
    with errors():
        value = parse_json_option("--result", result)
        if not isinstance(value, dict):
            raise CliError(f"--result must be a JSON object, not {short_json(value, limit=40)}; "
                           'wrap a plain value as {"result": ...}.')

    async def main() -> Event:
        return await _answer(db, session_id, call_id, command="respond",
                             app_name=app, user_id=user,
                             work=lambda store, app_name, user_id: submit_response(
            store, session_id=session_id, call_id=call_id, response=value,
            app_name=app_name, user_id=user_id))

    event = run(main())
    if json:
        print_json({"session_id": session_id, "call_id": call_id, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(printable(f"Result of call {call_id} of session {session_id} recorded (seq "
                             f"{event.seq}); the agent continues on its next run."))


def rerun(
    session_id: SessionArg,
    call_id: Annotated[str, typer.Argument(help="Id of the call in doubt (see evs pending).",
                                           show_default=False, metavar="CALL_ID")],
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
    force: Annotated[bool, typer.Option("--force", help="Decide even if the call was claimed "
                                        "less than --min-age seconds ago (its process may "
                                        "still be running it).")] = False,
    min_age: Annotated[float, typer.Option("--min-age", help="Refuse a call claimed more "
                                           "recently than this many seconds, unless --force.",
                                           min=0)] = DEFAULT_RERUN_MIN_AGE,
    app: AppOption = None,
    user: UserOption = None,
) -> None:
    """Allow a call in doubt (started, never answered: its process may have crashed) to run
    once more on the agent's next run.

    Use it when the call's side effect did not happen; if it did, record its result with
    evs respond instead. A call claimed less than --min-age seconds ago (default 300) is
    refused unless --force: the process that claimed it may still be running it."""

    async def main() -> Event:
        return await _answer(db, session_id, call_id, command="rerun",
                             app_name=app, user_id=user,
                             work=lambda store, app_name, user_id: rerun_call(
            store, session_id=session_id, call_id=call_id,
            min_claim_age=None if force else min_age, app_name=app_name, user_id=user_id))

    event = run(main())
    if json:
        print_json({"session_id": session_id, "call_id": call_id, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(printable(f"Call {call_id} of session {session_id} may run again (decision "
                             f"at seq {event.seq}); the agent re-runs it on its next run."))
