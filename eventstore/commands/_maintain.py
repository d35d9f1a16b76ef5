"""Maintenance commands: ``verify``, ``export``, ``import`` and ``db upgrade``/``db current``."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from eventstore.backends.protocol import SessionRecord, StoredEvent
from eventstore.store.facade import EventStore

from .._chain import GENESIS
from .._chain_check import CHAIN_CODES, check_chain
from .._exceptions import CorruptSnapshotError, SessionNotFoundError
from .._export import write_export
from .._fork import ForkLink
from .._open import resolve_url
from .._scopes import APP_SCOPE
from .._state import USER_PREFIX, apply_actions
from .._statefold import snapshot_state
from ._common import (
    DEFAULT_DB,
    EXIT_FINDINGS,
    EXIT_USAGE,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    UserOption,
    console,
    errors,
    fail,
    open_existing,
    print_json,
    printable,
    prog,
    refuse_directory,
    require_file,
    run,
    sqlite_path,
)
from ._heads import check_heads, read_heads
from ._log_check import LogCheck
from ._progress import LARGE, progress
from ._traces import check_otlp_options, parse_since, send_otlp, write_otlp
from ._verify import (
    Finding,
    check_artifacts,
    check_rows,
    check_scope,
    snapshot_finding,
)
from ._verify_caches import (
    app_position_findings,
    artifact_findings,
    fork_link_findings,
    shared_snapshot_findings,
)
from ._verify_streams import StreamCheck

__all__ = [
    "db_current",
    "db_rebuild_snapshots",
    "db_upgrade",
    "delete",
    "export",
    "verify",
    "verify_session",
]


async def _snapshots(
    store: EventStore, session_id: str, upto: int
) -> tuple[list[tuple[int, Any]], list[Finding]]:
    """Every stored snapshot of the session (newest first) and its head state, and a finding
    for each one that cannot be decoded."""
    found: list[tuple[int, Any]] = []
    damaged: list[Finding] = []
    cursor: int | None = upto
    while cursor is not None and cursor > 0:
        try:
            snapshot = await store.backend.load_snapshot(session_id, upto=cursor)
            if snapshot is None:
                break
            seq = snapshot.seq
            found.append((seq, snapshot_state(snapshot.state, session_id=session_id, seq=seq)))
        except CorruptSnapshotError as exc:
            if exc.seq is None:
                raise
            seq = exc.seq
            damaged.append(Finding(session_id=session_id, seq=seq, code="snapshot_undecodable",
                                   message=f"the state snapshot at seq {seq} cannot be decoded: "
                                   f"{exc.reason}"))
        cursor = seq - 1
    # The listing's head state (one row, current while its event keeps its chain hash) is
    # checked like a snapshot: a row that disagrees with the fold is a stale cache.
    head = (await store.backend.load_head_states([session_id])).get(session_id)
    if head is not None and head.seq <= upto:
        try:
            found.append((head.seq, snapshot_state(head.state, session_id=session_id,
                                                   seq=head.seq)))
        except CorruptSnapshotError as exc:
            damaged.append(Finding(session_id=session_id, seq=head.seq,
                                   code="snapshot_undecodable",
                                   message=f"the head state at seq {head.seq} cannot be "
                                   f"decoded: {exc.reason}"))
    return found, damaged


VERIFY_PAGE = 1000
"""Rows read and checked per step of ``evs verify``: the chain is checked page by page (each
page linked to the stored hash of the row before it and to the row after it), and what is
kept across pages (each event's id, each call's record for the pairing: ``LogCheck``) is in
a temporary file, not in memory, so memory does not grow with the log."""


async def verify_session(
    store: EventStore, session_id: str, streams: StreamCheck | None = None, *,
    app_name: str | None = None, user_id: str | None = None,
    users_checked: set[tuple[str, str]] | None = None,
) -> list[Finding]:
    """Return what ``evs verify SESSION`` finds wrong with the session's log (empty: nothing),
    reading it a page at a time (``VERIFY_PAGE``), its events checked against the
    ``user:``/``app:`` stream entries of ``streams`` (read by the caller, who checks the
    streams themselves once all sessions are done). Without ``streams``, the session's own two
    streams are read and checked too, with their snapshots and the app's position counter.
    The session's artifacts and fork link are checked (``_verify_caches``), and its user's
    artifacts unless ``users_checked`` (updated) holds its ``(app, user)`` already.
    ``app_name``/``user_id`` pick the session as ``EventStore.get_session`` does.

    Raises SessionNotFoundError for an unknown session, AmbiguousSessionError."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    where = {"app_name": info.app_name, "user_id": info.user_id}
    version = info.version
    given, session_id = session_id, await store.session_key(session_id, **where)
    origin = (await store.fork_links(given, **where)).origin
    head = await store.backend.get_session(session_id)
    snapshots, damaged = await _snapshots(store, session_id, version)
    pending = sorted(snapshots, key=lambda s: s[0])
    stored_artifacts = await store.list_artifacts(given, **where)
    alone = streams is None
    if head is not None and streams is None:
        streams = await StreamCheck.read(
            store.backend, [(head.app_name, APP_SCOPE), (head.app_name, head.user_id)])
    check = LogCheck(session_id)
    try:
        findings = await _verify_pages(store, session_id, given, check, streams, alone=alone,
                                       version=version, head=head, origin=origin,
                                       pending=pending, stored_artifacts=stored_artifacts)
    finally:
        await asyncio.to_thread(check.close)
    owner = (info.app_name, info.user_id)
    findings += await artifact_findings(
        store.backend, given, app_name=info.app_name, user_id=info.user_id, scope=given,
        user_scope=users_checked is None or owner not in users_checked)
    if users_checked is not None:
        users_checked.add(owner)
    findings += await fork_link_findings(store.backend, session_id, given)
    if alone and streams is not None:
        findings += await shared_snapshot_findings(store.backend, streams)
        findings += await app_position_findings(store.backend, [info.app_name])
    return findings + damaged


async def _verify_pages(
    store: EventStore, session_id: str, given: str, check: LogCheck,
    streams: StreamCheck | None, *, alone: bool, version: int, head: SessionRecord | None,
    origin: ForkLink | None, pending: list[tuple[int, Any]],
    stored_artifacts: dict[str, list[int]],
) -> list[Finding]:
    """The page-by-page part of ``verify_session``: ``check`` judges across pages what
    needs more than one page (ids and calls), off the event loop."""
    findings: list[Finding] = []
    folded: dict[str, Any] = {}
    shared_before: list[StoredEvent] = []
    mismatches = await store.backend.scope_mismatches(session_id) if head is not None else []
    prev, first, broken, newest = GENESIS, 1, False, 0
    imported_prev: bytes | None = GENESIS  # None once the imported chain broke, or ended

    async def page_after(after: int) -> list[StoredEvent]:
        return await store.backend.read(session_id, after=after, upto=None, backwards=False,
                                        limit=VERIFY_PAGE)

    rows = await page_after(0)
    while rows:
        following = await page_after(rows[-1].seq) if len(rows) == VERIFY_PAGE \
            else []
        seen_ids = await asyncio.to_thread(check.first_places,
                                           [(r.event_id, r.seq) for r in rows])
        last = not following
        found, events = check_rows(
            session_id, rows, version=version if last else None, decode=store.decode,
            head=head if last else None, signing_key=store.backend.signing_key,
            copied_through=origin.origin_seq if origin else 0, first_seq=first, prev=prev,
            following=min(following, key=lambda r: r.seq) if following else None,
            chain=not broken, seen_ids=seen_ids)
        broken = broken or any(f.code in CHAIN_CODES for f in found)
        findings += found
        if imported_prev is not None:
            imported_prev, problem = await _imported_chain(store, session_id, rows,
                                                           first_seq=first, prev=imported_prev)
            findings += problem
        await asyncio.to_thread(check.add, events)
        for event in events:
            while pending and event.seq is not None and pending[0][0] < event.seq:
                seq, snapshot = pending.pop(0)
                findings += filter(None, [snapshot_finding(session_id, seq, folded, snapshot)])
            apply_actions(folded, event.actions, scope="session")
        findings += check_artifacts(given, events, stored_artifacts)
        if head is not None and streams is not None:
            findings += streams.session(session_id, head.app_name, head.user_id, rows, events,
                                        copied_through=origin.origin_seq if origin else 0)
            findings += check_scope(session_id, head.app_name, head.user_id,
                                    mismatches, shared_before + list(rows))
            mismatches = []  # reported with the first page
            shared = [r for r in sorted(rows, key=lambda r: r.seq) if r.shared_state]
            shared_before = shared[-1:] or shared_before
        ordered = sorted(rows, key=lambda r: r.seq)
        prev, newest = ordered[-1].chain_hash or b"", ordered[-1].seq
        first = newest + 1
        rows = following
    if newest == 0:
        findings += check_rows(session_id, [], version=version, decode=store.decode, head=head,
                               signing_key=store.backend.signing_key)[0]
    for seq, snapshot in pending:
        findings += filter(None, [snapshot_finding(session_id, seq, folded, snapshot)])
    findings += await asyncio.to_thread(check.findings)
    if alone and streams is not None:
        findings += streams.streams(signing_key=store.backend.signing_key,
                                    checked_sessions={session_id})
    return findings


async def _imported_chain(
    store: EventStore, session_id: str, rows: list[StoredEvent], *, first_seq: int, prev: bytes
) -> tuple[bytes | None, list[Finding]]:
    """Check one page of an imported session against the chain its export carried (kept by
    ``evs import --force``): the rows as stored now, with the exported hashes. Return the hash
    the next page follows (None when the evidence ended or broke here) and the break, named
    ``imported_`` + its ``check_chain`` code."""
    links = await store.backend.read_imported(session_id, after=first_seq - 1,
                                              limit=len(rows))
    by_seq = {link.seq: link for link in links}
    exported = [replace(r, chain_hash=by_seq[r.seq].chain_hash) for r in rows
                if r.seq in by_seq]
    if not exported:
        return None, []
    problem = check_chain(exported, first_seq=first_seq, prev=prev)
    if problem is None:
        ends = len(exported) < len(rows)
        return None if ends else max(exported, key=lambda r: r.seq).chain_hash, []
    origin = by_seq[min(by_seq)].origin_session_id
    return None, [Finding(
        session_id=session_id, seq=problem.seq, code=f"imported_{problem.code}",
        message=f"{problem.message} (in the chain the export of session {origin!r} carried, "
        "kept by evs import --force as evidence; this store's own chain of the imported "
        "events is its own)")]


def verify(
    session_id: Annotated[str | None, typer.Argument(help="Session id (default: every "
                                                     "session).", show_default=False,
                                                     metavar="SESSION_ID")] = None,
    db: DbOption = DEFAULT_DB,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
    expect_heads: Annotated[Path | None, typer.Option(
        "--expect-heads", metavar="FILE", help="Also report each session whose head moved "
        "back: a head recorded in FILE (JSON Lines from evs heads, or the application's own "
        "record) that the log no longer holds (head_moved_back).")] = None,
) -> None:
    """Check the integrity of one session or all: seq gaps, duplicate ids, orphan or repeated
    responses, confirmations that do not match their call, undecodable rows, stale or edited
    snapshots (the session's and the user:/app: scopes'), artifact versions the log refers to
    that are not stored and stored ones whose bytes or MIME type were edited, fork links, the
    apps' position counters, the user:/app: state streams (every stream with all sessions; the
    session's app and user streams with one), and for a session imported with --force where
    the chain its export carried breaks (imported_…). The log is read a page at a time.

    Exits with status 3 when anything is wrong (1 when the check itself cannot run)."""

    async def main() -> tuple[int, list[Finding]]:
        expected = None if expect_heads is None else read_heads(expect_heads)
        async with await open_existing(db, read_only=True) as store:
            count, findings = await verify_all(store)
            mine = [h for h in expected or () if session_id in (None, h.session_id)]
            return count, findings + await check_heads(store, mine)

    async def verify_all(store: EventStore) -> tuple[int, list[Finding]]:
        if session_id is not None:
            size = await store.version(session_id, app_name=app, user_id=user)
            with progress(f"Verifying {size} events", total=None, size=size):
                return 1, await verify_session(store, session_id, app_name=app,
                                               user_id=user)
        findings: list[Finding] = []
        checked: set[str] = set()
        users: set[tuple[str, str]] = set()
        after: str | None = None
        streams = await StreamCheck.read(store.backend, None)
        with progress("Verifying sessions", total=None, size=LARGE) as tracker:
            while True:
                page = await store.list_sessions(after=after, limit=500)
                for info in page.sessions:
                    where = {"app_name": info.app_name, "user_id": info.user_id}
                    findings += await verify_session(store, info.id, streams, **where,
                                                     users_checked=users)
                    checked.add(await store.session_key(info.id, **where))
                    tracker.advance()
                if page.next_cursor is None:
                    findings += streams.streams(signing_key=store.backend.signing_key,
                                                checked_sessions=checked)
                    findings += await shared_snapshot_findings(store.backend, streams)
                    findings += await app_position_findings(store.backend)
                    return len(checked), findings
                after = page.next_cursor

    checked, findings = run(main())
    if json:
        print_json({"sessions_checked": checked, "ok": not findings,
                    "findings": [f.as_dict() for f in findings]})
    else:
        out = console()
        for finding in findings:
            where = f"seq {finding.seq}" if finding.seq is not None else "session"
            out.print(f"{finding.session_id}  {where}  {finding.code}: {finding.message}")
        noun = "session" if checked == 1 else "sessions"
        if findings:
            out.print(f"{len(findings)} problem(s) in {checked} {noun}.", style="bold red")
        else:
            out.print(f"OK: {checked} {noun} verified, no problems found.", style="green")
    if findings:
        raise typer.Exit(EXIT_FINDINGS)


async def _write_export(
    store: EventStore, session_id: str, sink: BinaryIO, *, user_id: str | None = None,
    app_name: str | None = None,
) -> int:
    """Write the export of ``session_id`` (of ``app_name``'s ``user_id`` when given) at its
    current version to ``sink`` (``eventstore._export``), with progress on a terminal; return
    how many events it holds."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    key = await store.session_key(session_id, app_name=info.app_name, user_id=info.user_id)
    record = await store.backend.get_session(key)
    if record is None:
        raise SessionNotFoundError(session_id)
    with progress(f"Exporting {record.version} events", total=None, size=record.version):
        return await write_export(store.backend, record, sink)


def _export_target(output: Path) -> Path:
    """The partial file an export is written to before it replaces ``output`` (so a failed
    export leaves no half file); CliError naming the problem when ``output`` cannot be
    written."""
    parent = output.parent
    if not parent.exists():
        raise CliError(f"Cannot write {printable(str(output))}: the directory "
                       f"{printable(str(parent))} does not exist.")
    if not parent.is_dir():
        raise CliError(f"Cannot write {printable(str(output))}: {printable(str(parent))} is "
                       "not a directory.")
    if output.is_dir():
        raise CliError(f"Cannot write {printable(str(output))}: it is a directory.")
    return parent / f".{output.name}.{os.getpid()}.partial"


def export(
    session_id: Annotated[str | None, typer.Argument(help="Session id (with --format otlp, "
                                                     "or --app instead).", show_default=False,
                                                     metavar="SESSION_ID")] = None,
    db: DbOption = DEFAULT_DB,
    output: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE",
                                                help="Write to this file "
                                                "instead of stdout.")] = None,
    json: Annotated[bool, typer.Option("--json", help="With --output: say what was written "
                                       "as a JSON object (the export itself is always JSON "
                                       "Lines).")] = False,
    format: Annotated[str, typer.Option("--format", metavar="jsonl|otlp",
                                        help="jsonl: the lossless session export; otlp: "
                                        "OpenTelemetry traces (GenAI conventions) as OTLP/JSON "
                                        "lines, needs agent-eventstore[otel].")] = "jsonl",
    endpoint: Annotated[str | None, typer.Option("--endpoint", metavar="URL",
                                                 help="otlp: send to this OTLP/HTTP endpoint "
                                                 "(http://host:4318 or its /v1/traces URL) "
                                                 "instead of writing JSON.")] = None,
    app_name: Annotated[str | None, typer.Option("--app", metavar="APP",
                                                 help="jsonl: the session's app (needed when "
                                                 "several apps or users have a session with "
                                                 "this id); otlp: every session of this app "
                                                 "(instead of SESSION_ID).")] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="DATE",
                                              help="otlp: only invocations active at or after "
                                              "this ISO date or date-time (UTC unless "
                                              "given).")] = None,
    user: Annotated[str | None, typer.Option(
        "--user", metavar="USER", help="jsonl: the session's user (needed when several users "
        "have a session with this id).")] = None,
) -> None:
    """Export a session as JSON Lines: a header line, one line per event, then one line per
    artifact version (bytes in base64) — lossless; evs import reads it back.

    With --format otlp: the session (or every session of --app) as OpenTelemetry traces, one
    trace per invocation, written as OTLP/JSON (one request per line) or sent to --endpoint;
    ids are derived from the log, so exporting again gives the same traces (docs/otel.md).

    With --output, the file is replaced once the export is complete and one line says what
    was written (on stdout, where nothing else goes then)."""
    if format not in ("jsonl", "otlp"):
        fail(f"--format must be jsonl or otlp, not {printable(format)!r}.", code=EXIT_USAGE)
    otlp = format == "otlp"
    with errors():
        check_otlp_options(otlp=otlp, session_id=session_id, app=app_name, since=since,
                           endpoint=endpoint, output=output)
        cutoff = parse_since(since)

    async def main(sink: BinaryIO) -> dict[str, Any]:
        async with await open_existing(db, read_only=True) as store:
            if otlp:
                sessions, spans = await write_otlp(store, sink, session_id=session_id,
                                                   app=app_name, since=cutoff)
                return {"sessions": sessions, "spans": spans}
            assert session_id is not None
            events = await _write_export(store, session_id, sink, user_id=user,
                                         app_name=app_name)
            return {"session_id": session_id, "events": events}

    if endpoint is not None:

        async def send() -> int:
            async with await open_existing(db, read_only=True) as store:
                return await send_otlp(store, endpoint=endpoint, session_id=session_id,
                                       app=app_name, since=cutoff)

        sent = run(send())
        typer.echo(f"Sent {sent} span(s) to {printable(endpoint)}.", err=True)
        return
    if output is None:
        run(main(sys.stdout.buffer))
        return
    with errors():
        partial = _export_target(output)
        try:
            sink = partial.open("wb")
        except OSError as exc:
            raise CliError(f"Cannot write {printable(str(output))}: {exc.strerror}.") from exc
    try:
        with sink:
            written = run(main(sink))
        with errors():
            try:
                partial.replace(output)
            except OSError as exc:
                raise CliError(
                    f"Cannot write {printable(str(output))}: {exc.strerror}."
                ) from exc
    finally:
        partial.unlink(missing_ok=True)
    # Said only with --output: on stdout the export itself is the output.
    if json:
        print_json({**written, "output": str(output)})
    elif otlp:
        typer.echo(f"Wrote {written['spans']} span(s) of {written['sessions']} session(s) to "
                   f"{printable(str(output))}.")
    else:
        typer.echo(f"Exported session {printable(session_id or '')} ({written['events']} "
                   f"events) to {printable(str(output))}.")


def _interactive() -> bool:
    """Whether a person can answer a question (stdin is a terminal)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def delete(
    session_id: Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                              metavar="SESSION_ID")],
    db: DbOption = DEFAULT_DB,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    app: AppOption = None,
    user: UserOption = None,
    json: JsonOption = False,
) -> None:
    """Delete a session: its events, snapshots and session artifacts (user: artifacts stay).

    Asks first unless --yes is given; without a terminal to ask on, --yes is required."""

    async def describe() -> str:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id, app_name=app, user_id=user)
            artifacts = sum(len(v) for k, v in (await store.list_artifacts(
                session_id, app_name=info.app_name, user_id=info.user_id)).items()
                            if not k.startswith(USER_PREFIX))
        return (f"session {info.id} (app {info.app_name}, user {info.user_id}, "
                f"{info.version} events, {artifacts} artifact version(s))")

    async def main() -> None:
        async with await open_existing(db, read_only=False) as store:
            await store.delete_session(session_id, app_name=app, user_id=user)

    what = run(describe())
    if not yes:
        if not _interactive():
            fail(f"Refusing to delete {printable(what)} without asking: give --yes.")
        if not typer.confirm(f"Delete {printable(what)}? This cannot be undone.",
                             default=False, err=True):
            fail("Nothing was deleted.")
    run(main())
    if json:
        print_json({"deleted": session_id})
    else:
        typer.echo(f"Deleted {printable(what)}.")


def db_rebuild_snapshots(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Drop every state snapshot and listing head state (caches: the log is untouched); state
    reads and listings rebuild them.

    The way out when a snapshot or head state cannot be decoded or evs verify reports a stale
    one."""

    async def main() -> int:
        async with await open_existing(db, read_only=False) as store:
            return await store.rebuild_snapshots()

    dropped = run(main())
    if json:
        print_json({"dropped": dropped})
    else:
        typer.echo(f"Dropped {dropped} snapshot(s); state reads rebuild them from the log.")


def _migrate_url(db: str) -> str:
    url = resolve_url(db)
    if url == "memory://":
        raise CliError("An in-memory store has no schema to migrate.")
    return url


def db_upgrade(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Create the database or migrate its schema to the newest revision (alembic head)."""

    async def main() -> tuple[str | None, str]:
        from .. import _migrate

        refuse_directory(db)
        url = _migrate_url(db)
        path = sqlite_path(db)
        before = await _migrate.current_revision(url) if path is None or path.exists() else None
        await _migrate.upgrade(url)
        return before, _migrate.head_revision()

    before, head = run(main())
    if json:
        print_json({"from": before, "to": head})
    elif before == head:
        typer.echo(f"Already at head ({head}).")
    else:
        typer.echo(f"Upgraded from {before or 'an empty database'} to {head}.")


def db_current(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Show the database's schema revision and whether it is at head (reads only: works on a
    read-only file)."""

    async def main() -> tuple[str | None, str, bool, bool]:
        from .. import _migrate

        url = _migrate_url(db)
        require_file(db)
        current = await _migrate.current_revision(url)
        return (current, _migrate.head_revision(), _migrate.is_newer(current),
                _migrate.is_later(current))

    current, head, newer, later = run(main())
    if json:
        print_json({"current": current, "head": head, "at_head": current == head,
                    "newer": newer})
    elif current == head:
        typer.echo(f"{current} (head)")
    elif newer and later:
        typer.echo(f"{current} (newer than this agent-eventstore, whose newest revision is "
                   f"{head}: upgrade agent-eventstore to use this database)")
    elif newer:
        typer.echo(f"{current} (a revision no agent-eventstore has ever had; this version's "
                   f"newest is {head}: stamped by hand or by another application)")
    else:
        behind = "no schema" if current is None else current
        flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
        typer.echo(f"{behind} (head is {head}; run: {prog()} db upgrade{flag})")
