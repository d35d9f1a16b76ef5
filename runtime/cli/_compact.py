"""``evs compact``: record a compaction of a session (docs/compaction.md).

Goes through ``runtime.compact``, so the CLI applies the library's rule: the range never covers an
open item (``evs pending`` lists them), and nothing is deleted. The summary is given with
``--summary``; without it, the model of the agent an installed package registered for the
session's app (entry-point group ``agent_eventstore.agents``) writes it.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Annotated

import typer

from eventstore import Event
from eventstore.commands import (
    DEFAULT_DB,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    UserOption,
    open_existing,
    print_json,
    printable,
    run,
)
from runtime import Agent, AgentRuntimeError, ModelSummarizer
from runtime import compact as compact_session

from ._answer import refuse_damaged_log
from ._pending import AGENTS_ENTRY_POINTS
from ._words import command_words

__all__ = ["compact"]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                           metavar="SESSION_ID")]


def _registered_agent(app_name: str) -> Agent | None:
    found = entry_points(group=AGENTS_ENTRY_POINTS, name=app_name)
    if not found:
        return None
    target = next(iter(found)).load()
    agent = target if isinstance(target, Agent) else target() if callable(target) else None
    return agent if isinstance(agent, Agent) else None


def compact(
    session_id: SessionArg,
    upto: Annotated[int | None, typer.Option(
        "--upto", help="Last seq the summary stands for (default: the newest seq before the "
        "oldest open item).", show_default=False, metavar="SEQ", min=1)] = None,
    summary: Annotated[str | None, typer.Option(
        "--summary", help="The summary text (default: written by the model of the agent "
        "registered for the session's app).", show_default=False, metavar="TEXT")] = None,
    db: DbOption = DEFAULT_DB,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Record a compaction: from now on the model is sent the summary instead of the events up
    to --upto. Nothing is deleted; a range holding an open call is refused."""

    async def main() -> Event:
        async with await open_existing(db, read_only=False) as store:
            info = await store.session_info(session_id, app_name=app, user_id=user)
            await refuse_damaged_log(store, session_id, command="compact",
                                     app_name=info.app_name, user_id=info.user_id)
            summarizer = None
            if summary is None:
                agent = _registered_agent(info.app_name)
                if agent is None:
                    raise CliError(
                        f"Give the summary with --summary: no agent is registered for app "
                        f"{info.app_name!r} (entry-point group {AGENTS_ENTRY_POINTS}) to write "
                        "one.")
                summarizer = ModelSummarizer(agent.model)
            try:
                return await compact_session(store, session_id, upto=upto, summary=summary,
                                             summarizer=summarizer, app_name=info.app_name,
                                             user_id=info.user_id)
            except AgentRuntimeError as exc:
                raise CliError(command_words(" ".join(str(exc).split()))) from exc

    event = run(main())
    record = event.actions.compaction
    assert record is not None
    if json:
        print_json({"session_id": session_id, "seq": event.seq, "event_id": event.id,
                    "start_seq": record.start_seq, "end_seq": record.end_seq})
    else:
        typer.echo(printable(
            f"Session {session_id} compacted: the summary at seq {event.seq} stands for seq "
            f"{record.start_seq}..{record.end_seq} in the model's requests (nothing was "
            "deleted)."))
