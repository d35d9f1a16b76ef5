"""Memory commands: ``evs memory rebuild`` and ``evs memory search``."""

from __future__ import annotations

from typing import Annotated

import typer

from eventstore.recall.service import MemoryService

from ._common import DEFAULT_DB, DbOption, JsonOption, console, open_existing, print_json, run

__all__ = ["memory_rebuild", "memory_search"]


def memory_rebuild(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Drop the memory index and derive it again from the log of every session added to memory
    (up to the seq it was added at). The index is derived data: nothing else changes."""

    async def main() -> tuple[int, int, int]:
        async with await open_existing(db, read_only=False) as store:
            done = await MemoryService(store).rebuild()
        return done.sessions, done.rows, done.dropped

    sessions, rows, dropped = run(main())
    if json:
        print_json({"sessions": sessions, "rows": rows, "dropped": dropped})
    else:
        console().print(
            f"Memory rebuilt from the log: {rows} event(s) of {sessions} session(s) indexed "
            f"({dropped} row(s) dropped first)."
        )


def memory_search(
    app_name: Annotated[str, typer.Argument(help="App name.", show_default=False,
                                              metavar="APP")],
    user_id: Annotated[str, typer.Argument(help="User id.", show_default=False,
                                             metavar="USER")],
    query: Annotated[str, typer.Argument(help="Words to look for.",
                                                show_default=False, metavar="QUERY")],
    limit: Annotated[int, typer.Option("--limit", min=1, metavar="N", help="Most results.")] = 10,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Search one user's memory of an app: the remembered events matching any word, best first."""

    async def main() -> list[dict[str, object]]:
        async with await open_existing(db, read_only=True) as store:
            found = await MemoryService(store).search_memory(
                app_name=app_name, user_id=user_id, query=query, limit=limit
            )
        return [
            {"session_id": e.session_id, "seq": e.seq, "author": e.author,
             "timestamp": e.timestamp, "text": e.text}
            for e in found
        ]

    entries = run(main())
    if json:
        print_json(entries)
        return
    out = console()
    for entry in entries:
        out.print(f"{entry['session_id']}  seq {entry['seq']}  {entry['author']}: {entry['text']}")
    if not entries:
        out.print("No remembered event matches.")
