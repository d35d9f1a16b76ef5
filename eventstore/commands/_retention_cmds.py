"""Retention commands: ``evs prune`` and ``evs retention set``/``show``/``clear``.

``evs prune`` is ``EventStore.prune`` (or ``prune_by_policy`` without ``--older-than``): every
session is archived in the ``evs export`` format, synced and verified before it is deleted.
Deleting without archives takes an explicit ``--no-archive``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from .._retention import PruneReport, RetentionPolicy
from ._common import (
    DEFAULT_DB,
    EXIT_USAGE,
    CliError,
    DbOption,
    JsonOption,
    console,
    fail,
    open_existing,
    print_json,
    printable,
    prog,
    run,
)

__all__ = ["format_duration", "parse_duration", "prune", "retention_clear", "retention_set",
           "retention_show"]

_UNITS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")


def parse_duration(text: str, option: str) -> float:
    """Seconds in a duration like ``30d``, ``12h``, ``1d12h``, ``90m``, ``2w`` or ``45s``; a
    usage error (exit 2) naming ``option`` otherwise."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not spec or "".join(n + u for n, u in parts) != spec or seconds <= 0:
        fail(f"{option} takes a duration such as 30d, 12h, 1d12h, 90m, 2w or 45s, not "
             f"{printable(text)!r}.", code=EXIT_USAGE)
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest ``parse_duration`` spelling of ``seconds`` (``30d``, ``1d12h``)."""
    out = []
    rest = seconds
    for unit, size in _UNITS.items():
        if unit == "w":
            continue
        count = int(rest // size)
        if count:
            out.append(f"{count}{unit}")
            rest -= count * size
    if rest > 1e-9 or not out:
        out.append(f"{rest:g}s")
    return "".join(out)


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _report_json(report: PruneReport) -> dict[str, Any]:
    return {
        "dry_run": report.dry_run,
        "deleted": len(report.deleted),
        "kept_changed": len(report.kept),
        "events_deleted": report.events_deleted,
        "archive_bytes": report.archive_bytes,
        "sessions": [
            {"session_id": s.session_id, "app_name": s.app_name, "user_id": s.user_id,
             "events": s.events, "updated_at": s.updated_at, "outcome": s.outcome,
             "archive": s.archive, "archive_bytes": s.archive_bytes}
            for s in report.sessions
        ],
    }


def _print_report(report: PruneReport) -> None:
    out = console()
    verb = {"deleted": "deleted", "would_delete": "would delete",
            "kept_changed": "kept (changed while archived)", "gone": "already gone"}
    for s in report.sessions:
        where = f" -> {printable(s.archive)}" if s.archive else ""
        out.print(f"{verb[s.outcome]}: {printable(s.session_id)} (app {printable(s.app_name)}, "
                  f"user {printable(s.user_id)}, {s.events} events, last update "
                  f"{_when(s.updated_at)}){where}", markup=False, highlight=False)
    if report.dry_run:
        count = len(report.sessions)
        events = sum(s.events for s in report.sessions)
        out.print(f"Dry run: {count} session(s), {events} events would be deleted; nothing "
                  "was written.", markup=False)
        return
    out.print(f"Deleted {len(report.deleted)} session(s), {report.events_deleted} events; "
              f"{report.archive_bytes} bytes of archives written"
              f"{f'; {len(report.kept)} kept because they changed' if report.kept else ''}.",
              markup=False)


def prune(
    older_than: Annotated[str | None, typer.Option(
        "--older-than", metavar="DURATION", show_default=False,
        help="Delete sessions last updated longer ago than this (30d, 12h, 1d12h, 90m, 2w, "
        "45s). Without it: the stored retention policies (evs retention).")] = None,
    app_name: Annotated[str | None, typer.Option(
        "--app", metavar="APP", help="Only this app's sessions (with --older-than).")] = None,
    archive: Annotated[Path | None, typer.Option(
        "--archive", metavar="DIR", help="Archive each session here first (DIR/APP/SESSION"
        ".jsonl, the evs export format; evs import reads it back). For policies: where a "
        "policy without its own archive goes.")] = None,
    no_archive: Annotated[bool, typer.Option(
        "--no-archive", help="Delete without archives (nothing can bring them back).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted; write nothing.")] = False,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Delete old sessions, each archived first: exported (the lossless evs export format),
    fsynced and read back equal to the log before it is deleted, all or nothing per session.

    A session appended to while it was archived is kept. Without --archive (or, for policies,
    a policy's own archive directory) nothing is deleted unless --no-archive says so."""
    if archive is not None and no_archive:
        fail("--archive and --no-archive contradict each other; give one.", code=EXIT_USAGE)
    if app_name is not None and older_than is None:
        fail("--app goes with --older-than (without it the stored policies say which apps).",
             code=EXIT_USAGE)
    seconds = None if older_than is None else parse_duration(older_than, "--older-than")

    async def main() -> PruneReport:
        async with await open_existing(db, read_only=dry_run) as store:
            if seconds is None:
                policies = await store.retention_policies()
                if not policies:
                    raise CliError(f"No retention policy is stored ({prog()} retention set) "
                                   "and no --older-than was given; nothing was deleted.")
                lacking = [p.app_name for p in policies if p.archive is None]
                if lacking and archive is None and not no_archive and not dry_run:
                    raise CliError(f"The policy of app {lacking[0]!r} names no archive "
                                   "directory: give --archive DIR, or --no-archive to delete "
                                   "without archives; nothing was deleted.", code=EXIT_USAGE)
                return await store.prune_by_policy(archive=archive, dry_run=dry_run)
            if archive is None and not no_archive and not dry_run:
                raise CliError(f"{prog()} prune deletes sessions: give --archive DIR to archive "
                               "them first, or --no-archive to delete without archives; "
                               "nothing was deleted.", code=EXIT_USAGE)
            return await store.prune(older_than=seconds, app_name=app_name,
                                     archive=archive, dry_run=dry_run)

    report = run(main())
    if json:
        print_json(_report_json(report))
    else:
        _print_report(report)


def _policy_json(policy: RetentionPolicy) -> dict[str, Any]:
    return {"app_name": policy.app_name, "older_than": policy.older_than,
            "older_than_text": format_duration(policy.older_than), "archive": policy.archive,
            "set_at": policy.set_at}


def retention_set(
    app_name: Annotated[str, typer.Option("--app", metavar="APP", show_default=False,
                                          help="The app the policy is for.")],
    older_than: Annotated[str, typer.Option(
        "--older-than", metavar="DURATION", show_default=False,
        help="Its sessions last updated longer ago are pruned (30d, 12h, …).")],
    archive: Annotated[Path | None, typer.Option(
        "--archive", metavar="DIR", help="Where evs prune archives them (else evs prune "
        "needs --archive or --no-archive).")] = None,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Store an app's retention policy (replacing its previous one); evs prune without
    --older-than applies the stored policies."""
    if not app_name.strip():
        fail("--app must not be empty.", code=EXIT_USAGE)
    seconds = parse_duration(older_than, "--older-than")

    async def main() -> RetentionPolicy:
        async with await open_existing(db, read_only=False) as store:
            return await store.set_retention(app_name=app_name, older_than=seconds,
                                             archive=archive)

    policy = run(main())
    if json:
        print_json(_policy_json(policy))
        return
    where = (f", archived to {printable(policy.archive)}" if policy.archive
             else " (evs prune will need --archive or --no-archive)")
    typer.echo(f"App {printable(app_name)}: sessions last updated more than "
               f"{format_duration(policy.older_than)} ago are pruned{where}.")


def retention_show(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Show the stored retention policies, one per app."""

    async def main() -> list[RetentionPolicy]:
        async with await open_existing(db, read_only=True) as store:
            return await store.retention_policies()

    policies = run(main())
    if json:
        print_json([_policy_json(p) for p in policies])
        return
    out = console()
    now = time.time()
    for p in policies:
        archive = printable(p.archive) if p.archive else "(none: evs prune names one)"
        out.print(f"{printable(p.app_name)}  older than {format_duration(p.older_than)} "
                  f"(before {_when(now - p.older_than)} today)  archive {archive}",
                  markup=False, highlight=False)
    if not policies:
        out.print("No retention policy is stored.", markup=False)


def retention_clear(
    app_name: Annotated[str | None, typer.Option("--app", metavar="APP",
                                                 help="The app whose policy goes.")] = None,
    all_apps: Annotated[bool, typer.Option("--all", help="Clear every app's policy.")] = False,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Delete an app's retention policy (or every one with --all); sessions are untouched."""
    if (app_name is None) == (not all_apps):
        fail("Give --app APP or --all (one of them).", code=EXIT_USAGE)

    async def main() -> int:
        async with await open_existing(db, read_only=False) as store:
            return await store.clear_retention(app_name=app_name)

    cleared = run(main())
    if json:
        print_json({"cleared": cleared})
    else:
        typer.echo(f"Cleared {cleared} retention polic{'y' if cleared == 1 else 'ies'}.")
