"""``evs import``: an export file back into a database as a new session, all or nothing.

The session, its events and its artifact versions are written in one transaction
(``EventStore.create_session(events=…, artifacts=…)``), so a killed import leaves the whole
session or no trace of it. A log ``evs verify`` would flag is refused unless ``--force`` keeps it
as evidence.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from eventstore.backends.protocol import ImportedLink, SessionRecord, StoredEvent
from eventstore.store.facade import Artifact, EventStore

from .._chain_check import check_chain
from .._codec import with_seq
from .._exceptions import ArtifactConflictError, SessionExistsError
from .._open import open_store
from ._common import (
    DEFAULT_DB,
    CliError,
    DbOption,
    JsonOption,
    fail,
    open_existing,
    print_json,
    prog,
    run,
    sqlite_path,
)
from ._exchange import Export, ExportedArtifact, ExportFormatError, parse_export
from ._progress import progress
from ._verify import Finding, check_artifacts, check_events

__all__ = ["import_"]


async def _user_artifacts(store: EventStore, parsed: Export) -> tuple[list[ExportedArtifact],
                                                                       dict[str, list[int]]]:
    """Return the ``user:`` artifact versions the target lacks (to be added) and every
    ``user:`` version the target holds; raise CliError when a version it already holds differs
    from the export's (it is never overwritten)."""
    backend = store.backend
    held = await backend.list_artifacts(app_name=parsed.app_name, user_id=parsed.user_id,
                                        session_id=None)
    missing: list[ExportedArtifact] = []
    for artifact in parsed.artifacts:
        if not artifact.user_scoped:
            continue
        if artifact.version not in held.get(artifact.filename, []):
            missing.append(artifact)
            continue
        existing = await backend.load_artifact(
            app_name=parsed.app_name, user_id=parsed.user_id, session_id=None,
            filename=artifact.filename, version=artifact.version)
        if existing is None or (existing.data, existing.mime_type) != (artifact.data,
                                                                      artifact.mime_type):
            raise CliError(
                f"User artifact {artifact.filename!r} version {artifact.version} of user "
                f"{parsed.user_id!r} (app {parsed.app_name!r}) already exists in {store.url} "
                "with different content; user artifacts are never overwritten, so nothing was "
                "imported."
            )
    return missing, held


def _chain_findings(parsed: Export, session_id: str) -> list[Finding]:
    """Where the exported events stop matching the chain the export carries: the events as
    this store would store them, checked against the exported hashes (``check_chain``)."""
    if parsed.chain_hashes is None:
        return []
    rows = []
    for seq, (event, chain_hash) in enumerate(zip(parsed.events, parsed.chain_hashes,
                                                  strict=True), start=1):
        new = EventStore._prepare(event)[1]
        rows.append(StoredEvent(
            session_id=session_id, seq=seq, position=0, event_id=new.event_id, kind=new.kind,
            invocation_id=new.invocation_id, author=new.author, timestamp=new.timestamp,
            shared_state=new.shared_state, schema_version=new.schema_version,
            payload=new.payload, chain_hash=chain_hash))
    head = SessionRecord(session_id=session_id, app_name=parsed.app_name,
                         user_id=parsed.user_id, created_at=0.0, head_seq=len(rows),
                         head_hash=rows[-1].chain_hash if rows else None)
    broken = check_chain(rows, head=head)
    if broken is None:
        return []
    return [Finding(session_id=session_id, seq=broken.seq, code=broken.code,
                    message=f"{broken.message} (against the chain the export carries)")]


def _evidence(parsed: Export) -> list[ImportedLink]:
    """The chain the export carries, as ``--force`` keeps it beside the importing store's
    own (empty when the export carries none)."""
    if parsed.chain_hashes is None:
        return []
    signatures = parsed.chain_signatures or [None] * len(parsed.chain_hashes)
    return [ImportedLink(seq=seq, chain_hash=chain_hash, signature=signature,
                         origin_session_id=parsed.session_id)
            for seq, (chain_hash, signature) in enumerate(
                zip(parsed.chain_hashes, signatures, strict=True), start=1)]


def _findings(parsed: Export, session_id: str, held: dict[str, list[int]]) -> list[Finding]:
    """What ``evs verify`` would flag in the imported session (its chain included)."""
    events = [with_seq(e, n) for n, e in enumerate(parsed.events, start=1)]
    stored: dict[str, list[int]] = {k: list(v) for k, v in held.items()}
    for artifact in parsed.artifacts:
        stored.setdefault(artifact.filename, []).append(artifact.version)
    return (_chain_findings(parsed, session_id) + check_events(session_id, events)
            + check_artifacts(session_id, events, stored))


def import_(
    file: Annotated[Path, typer.Argument(help="An export file ('-' reads stdin).",
                                         show_default=False, allow_dash=True,
                                         metavar="FILE")],
    db: DbOption = DEFAULT_DB,
    session_id: Annotated[str | None, typer.Option("--session-id", help="Create the session "
                                                   "under this id instead of the exported "
                                                   "one.", metavar="SESSION_ID")] = None,
    force: Annotated[bool, typer.Option("--force", help="Import a log that evs verify would "
                                        "flag (to keep it as evidence).")] = False,
    json: JsonOption = False,
) -> None:
    """Import an exported session as a new session, all or nothing.

    Session, events and artifact versions are written in one transaction: an interrupted
    import leaves no trace. Events and session artifacts come back byte for byte with their
    version numbers. user: artifacts are shared by the user's sessions and never overwritten:
    versions the database already holds must be identical (they are kept), missing ones are
    added. A log that evs verify would flag — an event that no longer matches the hash chain
    the export carries included — is refused unless --force is given. The importing store
    chains (and, keyed, signs) the events itself, under the new session id; with --force the
    chain the export carries is kept beside it as evidence, and evs verify names where that
    chain breaks. Values are never changed: an event that would not come back as exported is
    refused, --force or not. A missing SQLite file is created."""
    if session_id is not None and not session_id.strip():
        fail("--session-id must not be empty (leave it out to keep the exported id).",
             code=2)
    try:
        raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    except OSError as exc:
        fail(f"Cannot read {file}: {exc.strerror}.")
    try:
        with progress("Reading the export", total=None, size=raw.count(b"\n")):
            parsed = parse_export(raw.splitlines())
    except ExportFormatError as exc:
        fail(f"{file}: {exc}")
    target = session_id if session_id is not None else parsed.session_id

    async def main() -> tuple[int, int]:
        path = sqlite_path(db)
        if path is not None and not path.exists():
            store = await open_store(db, auto_upgrade=True)
        else:
            store = await open_existing(db, read_only=False)
        async with store:
            user_artifacts, held = await _user_artifacts(store, parsed)
            findings = _findings(parsed, target, held)
            if findings and not force:
                first = findings[0]
                where = f"seq {first.seq}" if first.seq is not None else "the session"
                more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
                raise CliError(
                    f"The exported log has {len(findings)} problem(s) evs verify would flag — "
                    f"{where}: {first.code}: {first.message}{more}; nothing was imported "
                    f"(add --force to keep it as evidence: {prog()} import --force …)."
                )
            own = [a for a in parsed.artifacts if not a.user_scoped]
            artifacts = [
                Artifact(filename=a.filename, version=a.version, mime_type=a.mime_type,
                         data=a.data, created_at=a.created_at)
                for a in (*own, *user_artifacts)
            ]
            try:
                with progress(f"Importing {len(parsed.events)} events", total=None,
                              size=len(parsed.events)):
                    session = await store.create_session(
                        app_name=parsed.app_name, user_id=parsed.user_id, session_id=target,
                        created_at=parsed.created_at, events=parsed.events,
                        artifacts=artifacts,
                        imported_chain=_evidence(parsed) if force else ())
            except SessionExistsError as exc:
                raise CliError(f"Session {target!r} already exists in {store.url}; nothing was "
                               "imported (choose another id with --session-id).") from exc
            except ArtifactConflictError as exc:
                raise CliError(f"{exc} Another writer saved a version of {exc.filename!r} "
                               "meanwhile; nothing was imported.") from exc
            return session.version, len(artifacts)

    count, artifacts = run(main())
    if json:
        print_json({"session_id": target, "events": count, "artifacts": artifacts})
    else:
        extra = f" and {artifacts} artifact version(s)" if artifacts else ""
        typer.echo(f"Imported {count} events{extra} into session {target}.")
