"""Answering a paused session from the command line: ``confirm``, ``respond`` and ``rerun``.

All go through the runtime's public answer APIs (``runtime.replay.answer_confirmation``,
``submit_response`` and ``rerun_call``), so the CLI applies exactly the library's checks: the
call exists, it was made by an agent, it is still unanswered, and the append is checked against
the version read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import orjson
import typer

from eventstore import Event, EventStore, InvalidEventError, check_json_value
from eventstore.cli import (
    DEFAULT_DB,
    CliError,
    DbOption,
    JsonOption,
    errors,
    open_existing,
    print_json,
    run,
    short_json,
)
from runtime import AgentRuntimeError
from runtime.replay import answer_confirmation, rerun_call, submit_response

from ._claims import DEFAULT_RERUN_MIN_AGE

__all__ = ["confirm", "parse_json_option", "rerun", "respond"]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False)]


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


async def _answer(db: str, work: Callable[[EventStore], Awaitable[Event]]) -> Event:
    async with await open_existing(db, read_only=False) as store:
        try:
            return await work(store)
        except AgentRuntimeError as exc:
            raise CliError(" ".join(str(exc).split())) from exc


def confirm(
    session_id: SessionArg,
    confirmation_id: Annotated[str, typer.Argument(help="Id of the confirmation request "
                                                   "(see evs pending).", show_default=False)],
    decision: Annotated[bool | None, typer.Option("--yes/--no", help="Approve or reject the "
                                                  "call.", show_default=False)] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="JSON passed along with the "
                                                "answer ('-' reads stdin).")] = None,
    db: DbOption = DEFAULT_DB,
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
        return await _answer(db, lambda store: answer_confirmation(
            store, session_id=session_id, confirmation_id=confirmation_id, confirmed=decision,
            payload=data))

    event = run(main())
    verdict = "approved" if decision else "rejected"
    if json:
        print_json({"session_id": session_id, "confirmation_id": confirmation_id,
                    "confirmed": decision, "payload": data, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(f"Confirmation {confirmation_id} of session {session_id} {verdict} "
                   f"(seq {event.seq}); the agent acts on it on its next run.")


def respond(
    session_id: SessionArg,
    call_id: Annotated[str, typer.Argument(help="Id of the pending call (see evs pending).",
                                           show_default=False)],
    response: Annotated[str, typer.Option("--json", help="The call's result: a JSON object "
                                          "('-' reads stdin).", show_default=False)],
    db: DbOption = DEFAULT_DB,
    output: Annotated[str, typer.Option("--output", help="text, or json for scripts.")] = "text",
) -> None:
    """Submit the result of a long-running (or in-doubt) call.

    ``--json`` is the result itself here; ``--output json`` prints the outcome as JSON."""
    if output not in ("text", "json"):
        raise typer.BadParameter("must be text or json.", param_hint="'--output'")
    with errors():
        value = parse_json_option("--json", response)
        if not isinstance(value, dict):
            raise CliError(f"--json must be a JSON object, not {short_json(value, limit=40)}; "
                           'wrap a plain value as {"result": ...}.')

    async def main() -> Event:
        return await _answer(db, lambda store: submit_response(
            store, session_id=session_id, call_id=call_id, response=value))

    event = run(main())
    if output == "json":
        print_json({"session_id": session_id, "call_id": call_id, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(f"Result of call {call_id} of session {session_id} recorded (seq "
                   f"{event.seq}); the agent continues on its next run.")


def rerun(
    session_id: SessionArg,
    call_id: Annotated[str, typer.Argument(help="Id of the call in doubt (see evs pending).",
                                           show_default=False)],
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
    force: Annotated[bool, typer.Option("--force", help="Decide even if the call was claimed "
                                        "less than --min-age seconds ago (its process may "
                                        "still be running it).")] = False,
    min_age: Annotated[float, typer.Option("--min-age", help="Refuse a call claimed more "
                                           "recently than this many seconds, unless --force.",
                                           min=0)] = DEFAULT_RERUN_MIN_AGE,
) -> None:
    """Allow a call in doubt (started, never answered: its process may have crashed) to run
    once more on the agent's next run.

    Use it when the call's side effect did not happen; if it did, record its result with
    ``evs respond`` instead. A call claimed less than --min-age seconds ago (default 300) is
    refused unless --force: the process that claimed it may still be running it."""

    async def main() -> Event:
        return await _answer(db, lambda store: rerun_call(
            store, session_id=session_id, call_id=call_id,
            min_claim_age=None if force else min_age))

    event = run(main())
    if json:
        print_json({"session_id": session_id, "call_id": call_id, "seq": event.seq,
                    "event_id": event.id})
    else:
        typer.echo(f"Call {call_id} of session {session_id} may run again (decision at seq "
                   f"{event.seq}); the agent re-runs it on its next run.")
