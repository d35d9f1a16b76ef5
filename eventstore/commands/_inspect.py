"""Read-only inspection commands: ``sessions``, ``show``, ``tail`` (and ``state``, from
``_inspect_state``).

Each opens the database read-only and never changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import shlex
from dataclasses import dataclass
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from eventstore.backends.protocol import StoredEvent
from eventstore.store.facade import EventStore, SessionInfo

from .._events import Event
from .._fork import SessionForks
from .._links import parent_link
from ._common import (
    DEFAULT_DB,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    Paged,
    SessionArg,
    UserOption,
    console,
    fail,
    open_existing,
    print_json,
    printable,
    prog,
    run,
    shared_address,
    stdout_closed,
)
from ._inspect_state import STATE_PAGE, state, state_payload
from ._render import event_entry, print_event, print_events
from ._show_pages import (
    SHOW_PAGE,
    ShownPage,
    ShowReading,
    decode_rows,
    linked_children,
    open_show,
)
from ._timeline import Timeline, analyze
from ._verify import Finding, check_artifacts, check_log

__all__ = [
    "STATE_PAGE",
    "SessionOrder",
    "ShowView",
    "confirm_command",
    "load_show_view",
    "sessions",
    "show",
    "state",
    "state_payload",
    "tail",
]

def confirm_command(db: str, session_id: str, *, address: str = "") -> str:
    """Return the start of the ``evs confirm`` command for this database and session;
    ``address`` (``address_flags``) picks the session when others hold its id too."""
    flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
    return f"{prog()} confirm{flag}{address} {shlex.quote(session_id)}"


def _stamp(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


class SessionOrder(enum.StrEnum):
    """How ``evs sessions`` orders its listing."""

    updated = "updated"
    """By last update, newest last (as ``ls -tr``); each page is the newest not yet shown."""
    id = "id"
    """By session id."""


_LISTING_PAGE = 10_000


async def _by_update(
    store: EventStore, *, app: str | None, user: str | None, after: str | None, limit: int
) -> tuple[list[SessionInfo], str | None]:
    """The page of ``evs sessions --sort updated``: the newest ``limit`` sessions updated
    before the cursor ``after`` (``UPDATED:ID`` of the oldest one shown), oldest first, and the
    cursor of the next (older) page. Every matching session is read: there is no index by
    update to page on."""
    bound: tuple[float, str] | None = None
    if after is not None:
        stamp, sep, last_id = after.partition(":")
        try:
            bound = (float(stamp), last_id)
        except ValueError:
            bound = None
        if not sep or bound is None:
            raise CliError(f"--after {after!r} is not a cursor of evs sessions --sort updated "
                           "(give the one its More: line printed).")
    found: list[SessionInfo] = []
    cursor: str | None = None
    while True:
        page = await store.list_sessions(app_name=app, user_id=user, after=cursor,
                                         limit=_LISTING_PAGE)
        found += [s for s in page.sessions if bound is None or (s.updated_at, s.id) < bound]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    found.sort(key=lambda s: (s.updated_at, s.id))
    shown = found[-limit:]
    more = len(found) > limit
    return shown, f"{shown[0].updated_at!r}:{shown[0].id}" if more else None


def sessions(
    db: DbOption = DEFAULT_DB,
    app: Annotated[str | None, typer.Option("--app", help="Only this app's sessions.",
                                            metavar="APP")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's sessions.",
                                             metavar="USER")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, metavar="N",
                                       help="Sessions per page.")] = 50,
    after: Annotated[str | None, typer.Option("--after", help="Cursor printed by the previous "
                                              "page.", metavar="CURSOR")] = None,
    sort: Annotated[SessionOrder, typer.Option("--sort", help="updated: by last update, "
                                               "newest last (each page the newest not yet "
                                               "shown); id: by session id.")
                    ] = SessionOrder.updated,
    json: JsonOption = False,
) -> None:
    """List sessions (app, user, id, events, last update), newest update last, one page at a
    time."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            if sort is SessionOrder.updated:
                listed, next_cursor = await _by_update(store, app=app, user=user, after=after,
                                                       limit=limit)
            else:
                page = await store.list_sessions(app_name=app, user_id=user, after=after,
                                                 limit=limit)
                listed, next_cursor = page.sessions, page.next_cursor
        if json:
            print_json({
                "sessions": [
                    {"id": s.id, "app_name": s.app_name, "user_id": s.user_id,
                     "events": s.version, "created_at": s.created_at,
                     "updated_at": s.updated_at}
                    for s in listed
                ],
                "next_cursor": next_cursor,
            })
            return
        out = console()
        table = Table("app", "user", "session", "events", "last update", box=None)
        for s in listed:
            table.add_row(s.app_name, s.user_id, s.id, str(s.version), _stamp(s.updated_at))
        out.print(table if listed else "No sessions.")
        if next_cursor is not None:
            # The next page needs the same filters, order and page size, or it is another
            # listing.
            words = [prog(), "sessions"]
            if db != DEFAULT_DB:
                words += ["--db", shlex.quote(db)]
            for flag, value in (("--app", app), ("--user", user)):
                if value is not None:
                    words += [flag, shlex.quote(value)]
            if limit != 50:
                words += ["--limit", str(limit)]
            if sort is not SessionOrder.updated:
                words += ["--sort", sort.value]
            words += ["--after", shlex.quote(next_cursor)]
            older = " (older)" if sort is SessionOrder.updated else ""
            out.print(f"More{older}: {' '.join(words)}")

    run(main())


def show(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    since: Annotated[int | None, typer.Option("--since", min=1, metavar="SEQ",
                                              help="Start at this seq (inclusive).")] = None,
    last: Annotated[int | None, typer.Option("--last", min=0, metavar="N",
                                             help="Only the newest N events.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print the stored JSON, one line per "
                                      "event.")] = False,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Show a session's history as a timeline: calls with their responses, confirmations,
    state changes, artifacts and errors.

    Damage is marked where it is, in the words evs verify uses (a gap, a repeated seq, a second
    answer, a row that cannot be decoded, a missing artifact version). Only the rows shown are
    read and checked, a page at a time (a line under the header says what was checked; evs
    verify checks the whole log); --json reads the whole log."""

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            if raw:
                key = await store.session_key(session_id, app_name=app, user_id=user)
                await _print_raw(store, key, since=since, last=last)
                return
            if json:
                view = await load_show_view(store, session_id, app_name=app, user_id=user)
                print_json(view.payload(since=since, last=last))
                return
            # Read, checked and printed a page at a time: the cost is what is printed.
            reading = await open_show(store, session_id, since=since, last=last,
                                      app_name=app, user_id=user)
            command = confirm_command(db, session_id,
                                      address=await shared_address(store, reading.info))
            pager = Paged()
            try:
                await _print_show(pager, reading, command=command)
            finally:
                await asyncio.to_thread(pager.close)

    run(main())


async def _print_show(pager: Paged, reading: ShowReading, *, command: str) -> None:
    """Print the timeline of ``reading`` to ``pager`` page by page as it is read, stopping
    when its reader wants no more (writing runs in a thread: a pager may keep it waiting)."""
    out = pager.console
    info, parent = reading.info, reading.parent

    def header() -> None:
        out.print(f"Session {info.id}  app {info.app_name}  user {info.user_id}  "
                  f"{info.version} events", style="bold", soft_wrap=True)  # ids stay copyable
        if parent is not None:
            out.print(f"Child of session {printable(parent[0])} (call {printable(parent[1])})",
                      style="cyan")
        for line in fork_lines(reading.forks):
            out.print(line, style="cyan")
        out.print(reading.scope(), style="dim")
        _print_problems(out, reading.findings)

    await asyncio.to_thread(header)
    async for page in reading.pages():
        if pager.done:
            return  # the reader has what it wanted (``| head``, ``q`` in the pager)
        await asyncio.to_thread(_print_page, pager, page, command)


def _print_page(pager: Paged, page: ShownPage, command: str) -> None:
    """Print one page's rows, each finding where it is (see ``ShownPage.findings``)."""
    out = pager.console
    by_seq: dict[int | None, list[Finding]] = {}
    for finding in page.findings:
        by_seq.setdefault(finding.seq, []).append(finding)
    _print_problems(out, by_seq.pop(None, []))
    rows = page.rows
    last_index = {r.seq: n for n, r in enumerate(rows)}
    first_index = {r.seq: n for n, r in reversed(list(enumerate(rows)))}
    # Findings about a seq no row holds (a deleted event, a removed tail) are printed
    # where that seq would stand: before the first row after it, or after the last row.
    missing = sorted(s for s in by_seq if s is not None and s not in last_index)
    for n, row in enumerate(rows):
        if pager.done:
            return
        here = by_seq.get(row.seq, [])
        while missing and missing[0] < row.seq:
            _print_problems(out, by_seq[missing.pop(0)])
        if first_index[row.seq] == n:  # a gap is marked where it is: before the row
            _print_problems(out, [f for f in here if f.code == "seq_gap"])
        event = page.decoded.get(id(row))
        if event is None:
            out.print(f"#{row.seq:<4} (stored row {row.event_id}, kind {row.kind}: "
                      "cannot be decoded)", style="bold red")
        else:
            print_events(out, [event], page.timeline, confirm_command=command,
                         children=page.children)
        if last_index[row.seq] == n:
            _print_problems(out, [f for f in here if f.code != "seq_gap"])
    for seq in missing:
        _print_problems(out, by_seq[seq])


def fork_lines(forks: SessionForks) -> list[str]:
    """The fork links of a session as ``evs show`` prints them (both sides)."""
    lines = []
    origin = forks.origin
    if origin is not None:
        gone = "" if forks.origin_exists else " (that session was deleted since)"
        lines.append(f"Forked from session {printable(origin.origin_session_id)} at seq "
                     f"{origin.origin_seq}{gone}")
    for link in forks.forks:
        lines.append(f"Forked at seq {link.origin_seq} into session "
                     f"{printable(link.session_id)}")
    return lines


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowView:
    """Everything ``evs show`` shows of one session: its rows, what ``verify`` finds in them,
    the decoded events paired into a timeline, and the agent-as-tool links both ways."""

    info: SessionInfo
    """The session."""
    rows: list[StoredEvent]
    """Every stored row, in log order (damaged ones included)."""
    findings: list[Finding]
    """What ``evs verify`` finds wrong with them."""
    decoded: dict[int, Event]
    """``id(row)`` -> its event, for the rows that decode."""
    timeline: Timeline
    """Calls paired with their responses, over the whole log."""
    parent: tuple[str, str] | None
    """The parent session and call when this session is a child agent's."""
    children: dict[str, str]
    """Call id -> the child session linked to that call."""
    forks: SessionForks
    """Where the session was forked from, and the forks made of it."""

    def fork_lines(self) -> list[str]:
        """The fork links as ``evs show`` prints them (both sides)."""
        return fork_lines(self.forks)

    def window(self, *, since: int | None, last: int | None) -> list[StoredEvent]:
        """The rows from seq ``since`` on, then only the newest ``last`` of them."""
        shown = [r for r in self.rows if since is None or r.seq >= since]
        if last is not None:
            shown = shown[len(shown) - last:] if last else []
        return shown

    def rowless_seqs(self, shown: list[StoredEvent]) -> list[int]:
        """The seqs findings name that no stored row holds (a deleted event, a removed tail),
        within the window ``shown`` (up to one past its last row), in order."""
        if not shown:
            return []
        stored = {r.seq for r in self.rows}
        low, high = shown[0].seq, shown[-1].seq + 1
        return sorted({f.seq for f in self.findings if f.seq is not None
                       and f.seq not in stored and low <= f.seq <= high})

    def payload(self, *, since: int | None = None, last: int | None = None) -> dict[str, Any]:
        """What ``evs show --json`` prints (also served by ``evs mcp-server``)."""
        shown = self.window(since=since, last=last)
        shown_seqs = {r.seq for r in shown}
        info, parent = self.info, self.parent
        return {
            "session": {"id": info.id, "app_name": info.app_name, "user_id": info.user_id,
                        "version": info.version},
            "events": [event_entry(self.decoded[id(r)], self.timeline) for r in shown
                       if id(r) in self.decoded],
            "problems": [f.as_dict() for f in self.findings
                         if f.seq is None or f.seq in shown_seqs
                         or f.seq in self.rowless_seqs(shown)],
            "links": {
                "parent": {"session_id": parent[0], "function_call_id": parent[1]}
                if parent else None,
                "children": self.children,
                "forked_from": None if self.forks.origin is None else {
                    "session_id": self.forks.origin.origin_session_id,
                    "seq": self.forks.origin.origin_seq,
                    "exists": self.forks.origin_exists,
                },
                "forks": [{"session_id": f.session_id, "seq": f.origin_seq,
                           "forked_at": f.forked_at} for f in self.forks.forks],
            },
        }


async def load_show_view(
    store: EventStore, session_id: str, *, app_name: str | None = None,
    user_id: str | None = None,
) -> ShowView:
    """Read and check the whole log of ``session_id`` (of the app's user, when given: see
    ``EventStore.get_session``; pairing and checking need all of it, even when only a window
    is shown). Raises SessionNotFoundError, AmbiguousSessionError."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    app_name, user_id = info.app_name, info.user_id
    key = await store.session_key(session_id, app_name=app_name, user_id=user_id)
    rows = await store.backend.read(key, after=None, upto=None, backwards=False, limit=None)
    forks = await store.fork_links(session_id, app_name=app_name, user_id=user_id)
    findings, events = check_log(key, rows, version=info.version, decode=store.decode,
                                 head=await store.backend.get_session(key),
                                 signing_key=store.backend.signing_key,
                                 copied_through=forks.origin.origin_seq if forks.origin else 0)
    findings += check_artifacts(session_id, events, await store.list_artifacts(
        session_id, app_name=app_name, user_id=user_id))
    return ShowView(
        info=info,
        rows=rows,
        findings=findings,
        decoded={id(row): event for row, event in decode_rows(store, rows)},
        timeline=analyze(events),
        parent=next((link for e in events[:4] if (link := parent_link(e)) is not None), None),
        children=await linked_children(store, session_id, events),
        forks=forks,
    )


def _print_problems(out: Console, findings: list[Finding]) -> None:
    for finding in findings:
        out.print(f"      ! {finding.code}: {finding.message}", style="bold red")


async def _print_raw(
    store: EventStore, session_id: str, *, since: int | None, last: int | None
) -> None:
    after = since - 1 if since is not None else None
    if last is not None:
        rows = await store.backend.read(session_id, after=after, upto=None, backwards=True,
                                        limit=last)
        rows.reverse()
        _print_raw_rows(rows)
        return
    while not stdout_closed():
        rows = await store.backend.read(session_id, after=after, upto=None, backwards=False,
                                        limit=SHOW_PAGE)
        _print_raw_rows(rows)
        if len(rows) < SHOW_PAGE:
            return
        after = rows[-1].seq  # read order: the hidden key, which edits of seq leave


def _print_raw_rows(rows: list[StoredEvent]) -> None:
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


def tail(
    session_id: SessionArg,
    db: DbOption = DEFAULT_DB,
    after: Annotated[int | None, typer.Option("--after", min=0, metavar="SEQ",
                                              help="Start after this seq (default: the "
                                              "current head).")] = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="Print the whole log "
                                             "first (same as --after 0).")] = False,
    max_events: Annotated[int | None, typer.Option("--max-events", min=1, metavar="N",
                                                   help="Stop after N events.")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", min=0, metavar="SECONDS",
                                                  help="Stop after this many seconds.")] = None,
    poll: Annotated[float, typer.Option("--poll", min=0.01, metavar="SECONDS",
                                        help="Seconds between polls.")] = 0.5,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Follow a session live, printing new events as they are appended.

    Says on stderr what it follows and from which seq; Ctrl-C stops it."""
    if from_start and after is not None:
        fail("give --from-start or --after, not both.", code=2)

    async def follow(store: EventStore, info: SessionInfo, start: int, seen: list[Event]) -> int:
        out = console()
        command = confirm_command(db, session_id, address=await shared_address(store, info))
        count = 0
        async for event in store.subscribe(session_id, after=start, poll_interval=poll,
                                           app_name=info.app_name, user_id=info.user_id):
            seen.append(event)
            timeline = analyze(seen)
            if json:
                typer.echo(orjson.dumps(event_entry(event, timeline)).decode())
            else:
                print_event(out, event, timeline, confirm_command=command)
            count += 1
            if (max_events is not None and count >= max_events) or stdout_closed():
                break
        return count

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id, app_name=app, user_id=user)
            start = 0 if from_start else info.version if after is None else after
            limits = []
            if max_events is not None:
                limits.append(f"stops after {max_events} event(s)")
            if timeout is not None:
                limits.append(f"stops after {timeout:g} s")
            ending = "; ".join([*limits, "Ctrl-C to stop"])
            typer.echo(printable(f"following {session_id} from seq {start + 1}; {ending}",
                                 newlines=False), err=True)
            # Earlier events are read for pairing calls with responses, not printed.
            seen = await store.read(session_id, upto=start, app_name=info.app_name,
                                    user_id=info.user_id) if start else []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await follow(store, info, start, seen)

    # Ctrl-C is not caught here: run_app turns it into "evs: interrupted." and status 130.
    run(main())
