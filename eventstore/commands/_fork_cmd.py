"""``evs fork``: a new session made of another's log up to a seq (``EventStore.fork``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    DEFAULT_DB,
    AppOption,
    DbOption,
    JsonOption,
    UserOption,
    open_existing,
    print_json,
    printable,
    run,
)

__all__ = ["fork"]


def fork(
    session_id: Annotated[str, typer.Argument(help="The session to fork.", show_default=False,
                                              metavar="SESSION_ID")],
    at: Annotated[int, typer.Option("--at", metavar="SEQ", show_default=False,
                                    help="Copy the session's events 1..SEQ.")],
    new_id: Annotated[str | None, typer.Option("--new-id", metavar="ID",
                                               help="The fork's id (generated when not "
                                               "given).")] = None,
    db: DbOption = DEFAULT_DB,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Fork a session at a seq: a new session (same app and user) whose log is the origin's
    events 1..SEQ, with its session artifacts as they were then and a link to the origin
    (evs show prints it on both sides). The origin is not changed.

    A seq inside a step (a tool call without its response yet) is refused, naming the nearest
    seqs a fork may start at. user: and app: state stay shared by the user's and app's
    sessions, the fork included."""

    async def main() -> tuple[str, int, int]:
        async with await open_existing(db, read_only=False) as store:
            made = await store.fork(session_id, at=at, new_session_id=new_id, app_name=app,
                                    user_id=user)
            artifacts = sum(len(v) for v in (await store.list_artifacts(
                made.id, app_name=made.app_name, user_id=made.user_id)).values())
            return made.id, made.version, artifacts

    fork_id, version, artifacts = run(main())
    if json:
        print_json({"session_id": fork_id, "origin_session_id": session_id, "origin_seq": at,
                    "events": version})
        return
    typer.echo(f"Forked session {printable(session_id)} at seq {at} into "
               f"{printable(fork_id)} ({version} events, {artifacts} artifact version(s) "
               "visible).")
