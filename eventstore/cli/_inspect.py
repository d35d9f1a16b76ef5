"""Read-only inspection commands: ``sessions``, ``show``, ``state``, ``tail``.

Each opens the database read-only and never changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import shlex
from typing import Annotated, Any

import orjson
import typer
from rich.table import Table

from .._events import Event
from .._state import APP_PREFIX, USER_PREFIX, session_part
from .._store import EventStore
from ._common import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    console,
    open_existing,
    print_json,
    run,
)
from ._render import event_entry, print_event, print_events, short_json
from ._timeline import analyze

__all__ = ["confirm_command", "sessions", "show", "state", "tail"]

SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False)]


def confirm_command(db: str, session_id: str) -> str:
    """Return the start of the ``evs confirm`` command for this database and session."""
    flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
    return f"evs confirm{flag} {shlex.quote(session_id)}"


def _stamp(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def sessions(
    db: DbOption = DEFAULT_DB,
    app: Annotated[str | None, typer.Option("--app", help="Only this app's sessions.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's sessions.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000,
                                       help="Sessions per page.")] = 50,
    after: Annotated[str | None, typer.Option("--after", help="Cursor printed by the previous "
                                              "page.")] = None,
    json: JsonOption = False,
) -> None:
    """List sessions (app, user, id, events, last update), one page at a time."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            page = await store.list_sessions(app_name=app, user_id=user, after=after, limit=limit)
        if json:
            print_json({
                "sessions": [
                    {"id": s.id, "app_name": s.app_name, "user_id": s.user_id,
                     "events": s.version, "created_at": s.created_at,
                     "updated_at": s.updated_at}
                    for s in page.sessions
                ],
                "next_cursor": page.next_cursor,
            })
            return
        out = console()
        table = Table("app", "user", "session", "events", "last update", box=None)
        for s in page.sessions:
            table.add_row(s.app_name, s.user_id, s.id, str(s.version), _stamp(s.updated_at))
        out.print(table if page.sessions else "No sessions.")
        if page.next_cursor is not None:
            out.print(f"More: --after {page.next_cursor}")

    run(main())


def show(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    since: Annotated[int | None, typer.Option("--since", min=1,
                                              help="Start at this seq (inclusive).")] = None,
    last: Annotated[int | None, typer.Option("--last", min=0,
                                             help="Only the newest N events.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print the stored JSON, one line per "
                                      "event.")] = False,
    json: JsonOption = False,
) -> None:
    """Show a session's history as a timeline: calls paired with responses, confirmations,
    state deltas, artifacts and errors."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id)
            if raw:
                await _print_raw(store, session_id, since=since, last=last)
                return
            # Pairing needs the whole log even when only a window is shown.
            events = await store.read(session_id)
        timeline = analyze(events)
        shown = [e for e in events if since is None or (e.seq or 0) >= since]
        if last is not None:
            shown = shown[len(shown) - last:] if last else []
        if json:
            print_json({
                "session": {"id": info.id, "app_name": info.app_name, "user_id": info.user_id,
                            "version": info.version},
                "events": [event_entry(e, timeline) for e in shown],
            })
            return
        out = console()
        out.print(f"Session {info.id}  app {info.app_name}  user {info.user_id}  "
                      f"{info.version} events", style="bold")
        print_events(out, shown, timeline, confirm_command=confirm_command(db, session_id))

    run(main())


async def _print_raw(
    store: EventStore, session_id: str, *, since: int | None, last: int | None
) -> None:
    after = since - 1 if since is not None else None
    if last is not None:
        rows = await store.backend.read(session_id, after=after, upto=None, backwards=True,
                                        limit=last)
        rows.reverse()
    else:
        rows = await store.backend.read(session_id, after=after, upto=None, backwards=False,
                                        limit=None)
    for row in rows:
        try:
            payload: Any = orjson.loads(row.payload)
        except orjson.JSONDecodeError:
            payload = row.payload.decode("utf-8", "replace")
        # The envelope's columns too: a version-2 payload does not repeat them.
        line = {"seq": row.seq, "event_id": row.event_id, "kind": row.kind,
                "author": row.author, "invocation_id": row.invocation_id,
                "timestamp": row.timestamp, "schema_version": row.schema_version,
                "payload": payload}
        typer.echo(orjson.dumps(line).decode())


def state(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    at: Annotated[int | None, typer.Option("--at", min=0, help="State after this seq "
                                           "(default: head).")] = None,
    json: JsonOption = False,
) -> None:
    """Show the session's state (session, user: and app: keys) with the seq that last set
    each key."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            values = await store.state(session_id, at=at)
            info = await store.session_info(session_id)
            origin = await _state_origins(store, session_id, at=at)
        upto = info.version if at is None else at
        rows = [
            {"key": key, "value": value, **origin.get(key, {"session_id": None, "seq": None})}
            for key, value in sorted(values.items())
        ]
        if json:
            print_json({"session_id": session_id, "at": upto, "state": values, "keys": rows})
            return
        out = console()
        out.print(f"State of {session_id} at seq {upto}", style="bold")
        if not rows:
            out.print("(empty)")
            return
        table = Table("key", "value", "set at", box=None)
        for row in rows:
            where = f"#{row['seq']}" if row["seq"] is not None else "?"
            if row["session_id"] not in (None, session_id):
                where += f" of session {row['session_id']}"
            table.add_row(row["key"], short_json(row["value"], limit=100), where)
        out.print(table)

    run(main())


async def _state_origins(
    store: EventStore, session_id: str, *, at: int | None
) -> dict[str, dict[str, Any]]:
    """Return key -> {session_id, seq} of the event that last set each key (up to ``at``)."""
    origins: dict[str, dict[str, Any]] = {}
    events = await store.read(session_id, upto=at)
    for event in events:
        for key in session_part(event.actions.state_delta):
            origins[key] = {"session_id": session_id, "seq": event.seq}
    info = await store.session_info(session_id)
    if at == 0 and info.version > 0:
        return origins
    backend = store.backend
    position = None
    if at is not None and at < info.version:
        rows = await backend.read(session_id, after=None, upto=at, backwards=True, limit=1)
        position = rows[0].position if rows else 0
    for user_id in (None, info.user_id):
        prefix = USER_PREFIX if user_id else APP_PREFIX
        shared = await backend.read_shared(app_name=info.app_name, user_id=user_id,
                                           upto_position=position)
        for row in shared:
            for key in store.decode(row).actions.state_delta:
                if key.startswith(prefix):
                    origins[key] = {"session_id": row.session_id, "seq": row.seq}
    return origins


def tail(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    after: Annotated[int | None, typer.Option("--after", min=0,
                                              help="Start after this seq (default: the "
                                              "current head).")] = None,
    max_events: Annotated[int | None, typer.Option("--max-events", min=1,
                                                   help="Stop after N events.")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", min=0,
                                                  help="Stop after S seconds.")] = None,
    poll: Annotated[float, typer.Option("--poll", min=0.01,
                                        help="Seconds between polls.")] = 0.5,
    json: JsonOption = False,
) -> None:
    """Follow a session live, printing new events as they are appended (Ctrl-C stops)."""

    async def follow(store: EventStore, start: int, seen: list[Event]) -> int:
        out = console()
        command = confirm_command(db, session_id)
        count = 0
        async for event in store.subscribe(session_id, after=start, poll_interval=poll):
            seen.append(event)
            timeline = analyze(seen)
            if json:
                typer.echo(orjson.dumps(event_entry(event, timeline)).decode())
            else:
                print_event(out, event, timeline, confirm_command=command)
            count += 1
            if max_events is not None and count >= max_events:
                break
        return count

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id)
            start = info.version if after is None else after
            # Earlier events are read for pairing calls with responses, not printed.
            seen = await store.read(session_id, upto=start) if start else []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await follow(store, start, seen)

    try:
        run(main())
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
