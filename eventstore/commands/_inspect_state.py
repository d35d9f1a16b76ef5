"""``evs state``: the session's state with the seq (and session) that last set each key, and
``state_payload``, what its ``--json`` prints (the ``evs`` MCP server's ``state`` tool too).

Opens the database read-only and never changes it.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import typer
from rich.table import Table

from eventstore.store.facade import EventStore, SessionInfo

from .._events import Event
from .._state import session_part
from ._common import (
    DEFAULT_DB,
    AppOption,
    DbOption,
    JsonOption,
    SessionArg,
    UserOption,
    console,
    open_existing,
    print_json,
    printable,
    run,
)
from ._render import compaction_text, short_json

__all__ = ["STATE_PAGE", "state", "state_payload"]


def state(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    at: Annotated[int | None, typer.Option("--at", min=0, help="State after this seq "
                                           "(default: head).")] = None,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Show the session's state (session, user: and app: keys) with the seq that last set
    each key."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id, app_name=app, user_id=user)
            payload, compacted = await state_payload(store, info, at=at)
        upto, rows = payload["at"], payload["keys"]
        record = compacted.actions.compaction if compacted is not None else None
        if json:
            print_json(payload)
            return
        out = console()
        out.print(f"State of {session_id} at seq {upto}", style="bold")
        if record is not None and compacted is not None:
            # State is the fold of every event; a compaction only shortens the model's requests.
            out.print(printable(f"#{compacted.seq} {compaction_text(record)}; the state folds "
                                "every event"), style="dim")
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


STATE_PAGE = 1000
"""Events read per step when ``evs state`` looks for the seq that set each key."""


async def state_payload(store: EventStore, info: SessionInfo, *,
                        at: int | None) -> tuple[dict[str, Any], Event | None]:
    """What ``evs state --json`` prints for the session at ``at`` (head by default), and the
    newest compaction event at or below it (the ``evs`` MCP server's ``state`` tool too)."""
    values = await store.state(info.id, at=at, app_name=info.app_name, user_id=info.user_id)
    origin, compacted = await _state_origins(store, info, at=at)
    rows = [
        {"key": key, "value": value, **origin.get(key, {"session_id": None, "seq": None})}
        for key, value in sorted(values.items())
    ]
    record = compacted.actions.compaction if compacted is not None else None
    payload = {"session_id": info.id, "at": info.version if at is None else at,
               "state": values, "keys": rows,
               "compaction": None if record is None or compacted is None else {
                   "seq": compacted.seq, "start_seq": record.start_seq,
                   "end_seq": record.end_seq}}
    return payload, compacted


async def _state_origins(
    store: EventStore, info: SessionInfo, *, at: int | None
) -> tuple[dict[str, dict[str, Any]], Event | None]:
    """Return key -> {session_id, seq} of the event that last set each key (up to ``at``), and
    the newest compaction event up to ``at``, from one pass over the log a page at a time."""
    origins: dict[str, dict[str, Any]] = {}
    compacted: Event | None = None
    session_id = info.id
    where = {"app_name": info.app_name, "user_id": info.user_id}
    stored_as = await store.session_key(session_id, **where)
    after = 0
    while True:  # a page at a time: only the keys' origins are kept
        events = await store.read(session_id, after=after, upto=at, limit=STATE_PAGE,
                                  app_name=info.app_name, user_id=info.user_id)
        for event in events:
            if event.actions.compaction is not None:
                compacted = event
            for key in session_part(event.actions.state_delta):
                origins[key] = {"session_id": session_id, "seq": event.seq}
            for key in session_part(dict.fromkeys(event.actions.state_deletions)):
                origins.pop(key, None)
        if len(events) < STATE_PAGE:
            break
        after = events[-1].seq or after + len(events)
    if at == 0 and info.version > 0:
        return origins, compacted
    backend = store.backend
    position = None
    if at is not None and at < info.version:
        rows = await backend.read(stored_as, after=None, upto=at, backwards=True, limit=1)
        position = rows[0].position if rows else 0
    for user_id in (None, info.user_id):
        entries = await backend.read_scope(app_name=info.app_name, user_id=user_id, after=0,
                                           upto_position=position)
        for entry in entries:
            # The state read before this decoded every entry (or failed naming the damage).
            touched = orjson.loads(entry.delta)
            for key in touched.get("sd", {}):
                origins[key] = {"session_id": entry.session_id, "seq": entry.seq}
            for key in touched.get("sx", ()):
                origins.pop(key, None)
    return origins, compacted
