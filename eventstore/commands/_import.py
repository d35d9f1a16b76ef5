"""``evs import``: an export file back into a database as a new session, all or nothing.

The file is read twice, a page at a time, never whole: first for its header and its artifact
lines (they follow the events), then for the events, which are checked and written page by
page (``EventStore.import_session``) in one transaction with the artifact versions: a failing
line, a log ``evs verify`` would flag (unless ``--force`` keeps it as evidence) or a killed
import leaves the whole session or no trace of it. Memory holds one page of events and the
artifacts; what ``evs verify`` keeps across pages (each event id, each call's record:
``LogCheck``) and the chain the header carries (``read_header``) go to temporary files, so
memory does not grow with the log.

``user:``/``app:`` changes count once (docs/operations.md, "Import and shared state"): when
the target's streams already hold an entry of one of the exported session's events, the
import is a copy of that session as ``evs fork`` makes (no stream entries, a fork link);
otherwise its changes are appended to the streams. (The first pass reads the events whose
lines name a ``user:``/``app:`` key to know which ones change shared state.)
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated

import typer

from eventstore.backends.protocol import ImportedLink, NewEvent, SessionRecord, StoredEvent
from eventstore.store.facade import Artifact, EventStore, ImportBatch

from .._chain import GENESIS
from .._chain_check import check_chain
from .._codec import with_seq
from .._events import Event
from .._exceptions import ArtifactConflictError, EventStoreError, SessionExistsError
from .._exchange import (
    ExportHeader,
    check_artifact_versions,
    check_counts,
    parse_line,
)
from .._open import open_store
from .._state import touches_shared_keys
from ._carried import CarriedChain, read_header
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
from ._exchange import ExportedArtifact, ExportFormatError
from ._log_check import LogCheck
from ._progress import Tracker, progress
from ._verify import Finding, check_artifacts

__all__ = ["IMPORT_PAGE", "import_"]

IMPORT_PAGE = 1000
"""Event lines read, checked and written per step of ``evs import``."""


class _Numbered:
    """An export file's non-blank lines with their 1-based numbers."""

    __slots__ = ("file", "last", "number")

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.number = 0
        self.last = 0
        """The number of the last non-blank line read."""

    def next(self) -> tuple[int, bytes] | None:
        """The next non-blank line and its number, or None at the end of the file."""
        for line in self.file:
            self.number += 1
            if line.strip():
                self.last = self.number
                return self.number, line
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Scanned:
    """What the first pass over an export read."""

    header: ExportHeader
    """The header, without the chain it carries (``chain``)."""
    chain: CarriedChain | None
    """The chain the header carries, None when it carries none (closed by the caller)."""
    body: tuple[int, int]
    """Where the line after the header starts: (byte offset, number of the header line)."""
    artifacts: list[ExportedArtifact]
    """The artifact versions, by filename and version."""
    artifact_lines: int
    """How many artifact lines the file has."""
    shared: set[str]
    """The ids of the events that change ``user:``/``app:`` state."""


def _prescan(file: IO[bytes]) -> _Scanned:
    """Read the header and the artifact lines (event lines are only skipped, but for those
    that may change shared state). Raises ExportFormatError."""
    header, chain, number = read_header(file)
    try:
        return _scan_body(file, header, chain, number)
    except BaseException:
        if chain is not None:
            chain.close()
        raise


def _scan_body(file: IO[bytes], header: ExportHeader, chain: CarriedChain | None,
               number: int) -> _Scanned:
    body = (file.tell(), number)
    lines = _Numbered(file)
    lines.number = lines.last = number
    found: list[tuple[int, ExportedArtifact]] = []
    shared: set[str] = set()
    while (item := lines.next()) is not None:
        number, line = item
        if (header.format_version >= 2 and b'"artifact"' in line[:64]) or (
                b'"user:' in line or b'"app:' in line):
            parsed = parse_line(number, line, header)
            if isinstance(parsed, ExportedArtifact):
                found.append((number, parsed))
            elif touches_shared_keys(parsed.actions):
                shared.add(parsed.id)
    return _Scanned(header=header, chain=chain, body=body,
                    artifacts=check_artifact_versions(found), artifact_lines=len(found),
                    shared=shared)


async def _counted_in(store: EventStore, header: ExportHeader, shared: set[str]) -> str | None:
    """The key of the session whose events' ``user:``/``app:`` changes the target's streams
    already hold for the export's events (``shared``: the ids of those that change shared
    state): the exported session's, when an entry of its user's or app's stream names that
    session and one of those event ids (it lives here, lived here, or was exported from
    here and imported back). None when the streams hold none of them."""
    if not shared:
        return None
    for user_id in (header.user_id, None):
        after = 0
        while entries := await store.backend.read_scope(
                app_name=header.app_name, user_id=user_id, after=after, upto_position=None):
            for entry in entries:
                if entry.session_id == header.session_id and entry.event_id in shared:
                    return entry.session_id
            after = entries[-1].stream_seq
    return None


async def _user_artifacts(store: EventStore, header: ExportHeader,
                          artifacts: list[ExportedArtifact]
                          ) -> tuple[list[ExportedArtifact], dict[str, list[int]]]:
    """Return the ``user:`` artifact versions the target lacks (to be added) and every
    ``user:`` version the target holds; raise CliError when a version it already holds differs
    from the export's (it is never overwritten)."""
    backend = store.backend
    held = await backend.list_artifacts(app_name=header.app_name, user_id=header.user_id,
                                        session_id=None)
    missing: list[ExportedArtifact] = []
    for artifact in artifacts:
        if not artifact.user_scoped:
            continue
        if artifact.version not in held.get(artifact.filename, []):
            missing.append(artifact)
            continue
        existing = await backend.load_artifact(
            app_name=header.app_name, user_id=header.user_id, session_id=None,
            filename=artifact.filename, version=artifact.version)
        if existing is None or (existing.data, existing.mime_type) != (artifact.data,
                                                                      artifact.mime_type):
            raise CliError(
                f"User artifact {artifact.filename!r} version {artifact.version} of user "
                f"{header.user_id!r} (app {header.app_name!r}) already exists in {store.url} "
                "with different content; user artifacts are never overwritten, so nothing was "
                "imported."
            )
    return missing, held


class _Reader:
    """The event pages of an export file, checked as they are read (``ImportBatch``es for
    ``EventStore.import_session``; blocking, called off the event loop). The last page
    carries the artifact versions; before it, what ``evs verify`` would flag is judged and,
    unless ``force``, the import is refused by raising CliError (nothing is written)."""

    def __init__(self, file: IO[bytes], *, name: str, header: ExportHeader,
                 chain: CarriedChain | None, body: tuple[int, int], target: str,
                 artifacts: list[Artifact], stored: dict[str, list[int]], force: bool,
                 artifact_lines: int, tracker: Tracker) -> None:
        self._lines = _Numbered(file)
        self._name = name
        self._header = header
        self._chain = chain
        self._target = target
        self._artifacts = artifacts
        self._stored = stored
        self._force = force
        self._artifact_lines = artifact_lines
        self._tracker = tracker
        self._check = LogCheck(target)
        self._findings: list[Finding] = []  # artifact_missing, in seq order
        self._chain_findings: list[Finding] = []
        self._pending: list[StoredEvent] = []  # the previous page, for the chain check
        self._prev = GENESIS
        self._chain_broken = chain is None
        self._count = 0
        self._done = False
        file.seek(body[0])  # after the header, parsed already
        self._lines.number = self._lines.last = body[1]

    def __call__(self) -> ImportBatch | None:
        try:
            return self._page()
        except ExportFormatError as exc:
            raise CliError(f"{self._name}: {exc}") from exc

    def _page(self) -> ImportBatch | None:
        if self._done:
            return None
        header = self._header
        events: list[Event] = []
        prepared: list[NewEvent] = []
        numbers: list[int] = []
        failed: ExportFormatError | None = None
        while len(events) < IMPORT_PAGE and (item := self._lines.next()) is not None:
            number, line = item
            try:
                parsed = parse_line(number, line, header, encodable=False)
            except ExportFormatError as exc:
                failed = exc  # raised after a repeated id on an earlier line, if any
                break
            if isinstance(parsed, ExportedArtifact):
                continue  # read by the first pass
            events.append(parsed)
            numbers.append(number)
            try:
                prepared.append(EventStore._prepare(parsed)[1])
            except EventStoreError as exc:
                reason = " ".join(str(exc).split())
                failed = ExportFormatError(number, f"not a valid event: {reason}")
                failed.__cause__ = exc
                break
        places = self._check.first_places([(e.id, n) for e, n in zip(events, numbers,
                                                                     strict=True)])
        for event, number in zip(events, numbers, strict=True):
            if places[event.id] != number:
                raise ExportFormatError(number, f"event id {event.id!r} already appears on "
                                        f"line {places[event.id]}.")
        if failed is not None:
            raise failed
        first = self._count + 1
        self._count += len(events)
        seqd = [with_seq(e, n) for n, e in enumerate(events, start=first)]
        self._check_page(first, prepared, seqd)
        self._tracker.advance(len(events))
        last = len(events) < IMPORT_PAGE
        links: list[ImportedLink] = []
        if self._force and self._chain is not None:
            links = [ImportedLink(seq=seq, chain_hash=chain_hash, signature=signature,
                                  origin_session_id=header.session_id)
                     for seq, (chain_hash, signature) in enumerate(
                         self._chain.page(first, self._count), start=first)]
        if not last:
            return ImportBatch(events=prepared, imported_chain=links)
        self._done = True
        self._finish()
        return ImportBatch(events=prepared, imported_chain=links, artifacts=self._artifacts)

    def close(self) -> None:
        """Delete what the reader kept on disk (blocking)."""
        self._check.close()

    def _carried(self, first: int, count: int) -> list[tuple[bytes, bytes | None]]:
        """The carried links of ``count`` events from seq ``first``; an event past the
        carried chain's end (the header announced fewer) gets an empty hash, which no check
        accepts (``check_counts`` refuses such a file anyway)."""
        assert self._chain is not None
        links = self._chain.page(first, first + count - 1)
        return links + [(b"", None)] * (count - len(links))

    def _check_page(self, first: int, prepared: list[NewEvent], seqd: list[Event]) -> None:
        target = self._target
        self._check.add(seqd)
        self._findings += check_artifacts(target, seqd, self._stored)
        if self._chain_broken:
            return
        rows = [StoredEvent(
            session_id=target, seq=seq, position=0, event_id=new.event_id, kind=new.kind,
            invocation_id=new.invocation_id, author=new.author, timestamp=new.timestamp,
            shared_state=new.shared_state, schema_version=new.schema_version,
            payload=new.payload, chain_hash=chain_hash)
            for seq, (new, (chain_hash, _)) in enumerate(
                zip(prepared, self._carried(first, len(prepared)), strict=True), start=first)]
        # A page is checked once the next one is read: a break at its last row is classified
        # by the row after it (``check_chain``), as in the whole log.
        if self._pending:
            self._chain_part(self._pending, following=rows[0] if rows else None)
        self._pending = rows

    def _chain_part(self, rows: list[StoredEvent], *, following: StoredEvent | None) -> None:
        count = self._count
        head = None
        if following is None:
            head = SessionRecord(session_id=self._target, app_name=self._header.app_name,
                                 user_id=self._header.user_id, created_at=0.0,
                                 head_seq=count,
                                 head_hash=self._carried(count, 1)[0][0] if count else None)
        chained = [*rows, following] if following is not None else rows
        broken = check_chain(chained, head=head, first_seq=rows[0].seq, prev=self._prev)
        if broken is not None and following is not None and broken.seq == following.seq:
            broken = None  # the next page's to report
        if broken is not None:
            self._chain_broken = True
            self._chain_findings.append(Finding(
                session_id=self._target, seq=broken.seq, code=broken.code,
                message=f"{broken.message} (against the chain the export carries)"))
        self._prev = rows[-1].chain_hash or b""

    def _finish(self) -> None:
        """At the end of the file: the counts the header announced, then what ``evs verify``
        would flag; raise to refuse (nothing is written)."""
        check_counts(self._header, self._lines.last, self._count, self._artifact_lines)
        if self._pending and not self._chain_broken:
            self._chain_part(self._pending, following=None)
        self._pending = []
        findings = self._chain_findings + self._check.findings() + self._findings
        if findings and not self._force:
            first = findings[0]
            where = f"seq {first.seq}" if first.seq is not None else "the session"
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise CliError(
                f"The exported log has {len(findings)} problem(s) evs verify would flag — "
                f"{where}: {first.code}: {first.message}{more}; nothing was imported "
                f"(add --force to keep it as evidence: {prog()} import --force …)."
            )


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
    refused, --force or not. The file is read a page at a time (memory does not grow with
    the log). user:/app: state changes count once: applied to the user's and app's state
    unless the database's state already holds them (the session lives or lived there, or
    was exported from it): then the imported session is a copy of it, as evs fork makes,
    whose events keep their changes in the log without applying them again. A missing
    SQLite file is created."""
    if session_id is not None and not session_id.strip():
        fail("--session-id must not be empty (leave it out to keep the exported id).",
             code=2)
    with tempfile.TemporaryFile() if str(file) == "-" else _opened(file) as source:
        if str(file) == "-":  # read twice: kept in a temporary file, never in memory
            shutil.copyfileobj(sys.stdin.buffer, source, 1 << 20)
        source.seek(0)
        try:
            scanned = _prescan(source)
        except ExportFormatError as exc:
            fail(f"{file}: {exc}")
        try:
            target = session_id if session_id is not None else scanned.header.session_id
            count, artifacts = run(_import(source, file, db, scanned, target, force=force))
        finally:
            if scanned.chain is not None:
                scanned.chain.close()
    if json:
        print_json({"session_id": target, "events": count, "artifacts": artifacts})
    else:
        extra = f" and {artifacts} artifact version(s)" if artifacts else ""
        typer.echo(f"Imported {count} events{extra} into session {target}.")


def _opened(file: Path) -> IO[bytes]:
    try:
        return file.open("rb")
    except OSError as exc:
        fail(f"Cannot read {file}: {exc.strerror}.")


async def _import(source: IO[bytes], file: Path, db: str, scanned: _Scanned, target: str, *,
                  force: bool) -> tuple[int, int]:
    header, exported, shared = scanned.header, scanned.artifacts, scanned.shared
    path = sqlite_path(db)
    if path is not None and not path.exists():
        store = await open_store(db, auto_upgrade=True)
    else:
        store = await open_existing(db, read_only=False)
    async with store:
        user_artifacts, held = await _user_artifacts(store, header, exported)
        counted_in = await _counted_in(store, header, shared)
        stored: dict[str, list[int]] = {k: list(v) for k, v in held.items()}
        for artifact in exported:
            stored.setdefault(artifact.filename, []).append(artifact.version)
        own = [a for a in exported if not a.user_scoped]
        artifacts = [
            Artifact(filename=a.filename, version=a.version, mime_type=a.mime_type,
                     data=a.data, created_at=a.created_at)
            for a in (*own, *user_artifacts)
        ]
        try:
            with progress(f"Importing {header.events} events", total=header.events,
                          size=header.events) as tracker:
                reader = await asyncio.to_thread(
                    _Reader, source, name=str(file), header=header, chain=scanned.chain,
                    body=scanned.body, target=target, artifacts=artifacts, stored=stored,
                    force=force, artifact_lines=scanned.artifact_lines, tracker=tracker)
                try:
                    count = await store.import_session(
                        app_name=header.app_name, user_id=header.user_id, session_id=target,
                        created_at=header.created_at, pages=reader, copy_of=counted_in)
                finally:
                    await asyncio.to_thread(reader.close)
        except SessionExistsError as exc:
            raise CliError(f"Session {target!r} already exists in {store.url}; nothing was "
                           "imported (choose another id with --session-id).") from exc
        except ArtifactConflictError as exc:
            raise CliError(f"{exc} Another writer saved a version of {exc.filename!r} "
                           "meanwhile; nothing was imported.") from exc
        return count, len(artifacts)
