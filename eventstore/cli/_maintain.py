"""Maintenance commands: ``verify``, ``export``, ``import`` and ``db upgrade``/``db current``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from .._exceptions import SessionExistsError
from .._open import open_store, resolve_url
from .._store import EventStore
from ._common import (
    DEFAULT_DB,
    EXIT_FINDINGS,
    CliError,
    DbOption,
    JsonOption,
    console,
    fail,
    open_existing,
    print_json,
    require_file,
    run,
    sqlite_path,
)
from ._exchange import ExportFormatError, dump_event, dump_header, parse_export
from ._verify import Finding, check_log, check_snapshots

__all__ = ["db_current", "db_upgrade", "export", "import_", "verify"]


async def _snapshots(store: EventStore, session_id: str, upto: int) -> list[tuple[int, Any]]:
    """Every stored snapshot of the session, newest first."""
    found: list[tuple[int, Any]] = []
    cursor: int | None = upto
    while cursor is not None and cursor > 0:
        snapshot = await store.backend.load_snapshot(session_id, upto=cursor)
        if snapshot is None:
            break
        seq, data = snapshot
        found.append((seq, orjson.loads(data)))
        cursor = seq - 1
    return found


async def _verify_session(store: EventStore, session_id: str) -> list[Finding]:
    version = await store.version(session_id)
    rows = await store.backend.read(session_id, after=None, upto=None, backwards=False,
                                    limit=None)
    findings, events = check_log(session_id, rows, version=version, decode=store.decode)
    findings += check_snapshots(session_id, events, await _snapshots(store, session_id, version))
    return findings


def verify(
    session_id: Annotated[str | None, typer.Argument(help="Session id (default: every "
                                                     "session).", show_default=False)] = None,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Check the integrity of one session or all: seq gaps, duplicate ids, orphan or repeated
    responses, confirmations that do not match their call, undecodable rows, stale snapshots.

    Exits with status 3 when anything is wrong (1 when the check itself cannot run)."""

    async def main() -> tuple[int, list[Finding]]:
        async with await open_existing(db, read_only=True) as store:
            if session_id is not None:
                return 1, await _verify_session(store, session_id)
            findings: list[Finding] = []
            checked = 0
            after: str | None = None
            while True:
                page = await store.list_sessions(after=after, limit=500)
                for info in page.sessions:
                    findings += await _verify_session(store, info.id)
                    checked += 1
                if page.next_cursor is None:
                    return checked, findings
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


def export(
    session_id: Annotated[str, typer.Argument(help="Session id.", show_default=False)],
    db: DbOption = DEFAULT_DB,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file "
                                                "instead of stdout.")] = None,
) -> None:
    """Export a session as JSON Lines: a header line, then one event per line (lossless)."""

    async def main() -> list[bytes]:
        async with await open_existing(db, read_only=True) as store:
            info = await store.session_info(session_id)
            events = await store.read(session_id)
        header = dump_header(app_name=info.app_name, user_id=info.user_id,
                             session_id=info.id, events=len(events),
                             created_at=info.created_at)
        return [header, *(dump_event(e) for e in events)]

    lines = run(main())
    data = b"".join(line + b"\n" for line in lines)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        output.write_bytes(data)


def import_(
    file: Annotated[Path, typer.Argument(help="An export file ('-' reads stdin).",
                                         show_default=False, allow_dash=True)],
    db: DbOption = DEFAULT_DB,
    session_id: Annotated[str | None, typer.Option("--session-id", help="Create the session "
                                                   "under this id instead of the exported "
                                                   "one.")] = None,
    json: JsonOption = False,
) -> None:
    """Import an exported session as a new session (never overwrites an existing one).

    Every line is validated before anything is written. A missing SQLite file is created."""
    try:
        raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    except OSError as exc:
        fail(f"Cannot read {file}: {exc.strerror}.")
    try:
        parsed = parse_export(raw.splitlines())
    except ExportFormatError as exc:
        fail(f"{file}: {exc}")
    target = session_id or parsed.session_id

    async def main() -> int:
        path = sqlite_path(db)
        if path is not None and not path.exists():
            store = await open_store(db, auto_upgrade=True)
        else:
            store = await open_existing(db, read_only=False)
        async with store:
            try:
                await store.create_session(app_name=parsed.app_name, user_id=parsed.user_id,
                                           session_id=target)
            except SessionExistsError as exc:
                raise CliError(f"Session {target!r} already exists in {store.url}; nothing was "
                               "imported (choose another id with --session-id).") from exc
            if not parsed.events:
                return 0
            try:
                stored = await store.append(target, parsed.events, expected_version=0)
            except BaseException:
                # The session was created for this import only: leave nothing half-imported.
                await store.delete_session(target)
                raise
            return len(stored)

    count = run(main())
    if json:
        print_json({"session_id": target, "events": count})
    else:
        typer.echo(f"Imported {count} events into session {target}.")


def _migrate_url(db: str) -> str:
    url = resolve_url(db)
    if url == "memory://":
        raise CliError("An in-memory store has no schema to migrate.")
    return url


def db_upgrade(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Create the database or migrate its schema to the newest revision (alembic head)."""

    async def main() -> tuple[str | None, str]:
        from .. import _migrate

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
    """Show the database's schema revision and whether it is at head."""

    async def main() -> tuple[str | None, str]:
        from .. import _migrate

        url = _migrate_url(db)
        require_file(db)
        return await _migrate.current_revision(url), _migrate.head_revision()

    current, head = run(main())
    if json:
        print_json({"current": current, "head": head, "at_head": current == head})
    elif current == head:
        typer.echo(f"{current} (head)")
    else:
        behind = "no schema" if current is None else current
        typer.echo(f"{behind} (head is {head}; run: evs db upgrade --db {db})")
