"""Archive files: one session's export (``eventstore._export``) written where a prune keeps it,
synced to disk and checked against the log before anyone may delete the session.

Layout: ``DIR/<app>/<session>.jsonl``, names escaped so that any id is one safe file name
(``archive_name``). An archive is first written to a hidden partial file in the same directory,
flushed and fsynced, read back and compared with the log (``verify_archive``), then linked to
its final name (never replacing another file: a different archive already holding the name —
an earlier session with the same id — keeps it, and this one gets ``<session>.1.jsonl`` …) and
the directory is fsynced. So whatever kills the process, a file with a final name is a complete,
verified archive; at worst a partial file is left behind (``.*.partial``, safe to delete).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import urllib.parse
from pathlib import Path

from ._codec import with_seq
from ._exceptions import ArchiveError
from ._exchange import ExportFormatError, parse_export
from ._export import ExportedLog, write_export
from .backends.protocol import Backend, SessionRecord

__all__ = ["archive_name", "verify_archive", "write_archive"]

_MAX_NAME = 200
"""The longest escaped name kept whole (file systems allow 255 bytes)."""


def archive_name(name: str) -> str:
    """One file-name component for an app or session id: percent-escaped (``/``, ``%``,
    controls and everything but letters, digits and ``_.-~``), a leading dot escaped (no
    ``.``/``..``, no hidden file), cut to ``_MAX_NAME`` characters with a hash of the whole
    when longer."""
    escaped = urllib.parse.quote(name, safe="")
    if escaped.startswith("."):
        escaped = "%2E" + escaped[1:]
    if len(escaped) > _MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        escaped = f"{escaped[:_MAX_NAME - 17]}-{digest}"
    return escaped or "%00"


async def write_archive(backend: Backend, record: SessionRecord, directory: Path
                        ) -> tuple[Path, int]:
    """Write, sync and verify the archive of ``record``'s session at ``record.version`` under
    ``directory`` and return its path and size in bytes (see the module docstring).

    Raises ArchiveError when it cannot be written or read back equal to the log,
    SessionNotFoundError when the session is deleted meanwhile; a partial file is removed in
    every case."""
    folder = directory / archive_name(record.app_name)
    stem = archive_name(record.session_id)
    partial = folder / f".{stem}.{os.getpid()}.partial"
    try:
        await asyncio.to_thread(_make_dirs, folder)
        sink = await asyncio.to_thread(partial.open, "wb")
        try:
            seen = ExportedLog()
            await write_export(backend, record, sink, seen=seen)
            await asyncio.to_thread(os.fsync, sink.fileno())
        finally:
            await asyncio.to_thread(sink.close)
        data = await asyncio.to_thread(partial.read_bytes)
        await asyncio.to_thread(verify_archive, record, seen, data, path=partial)
        return await asyncio.to_thread(_place, partial, folder, stem, data), len(data)
    except OSError as exc:
        raise ArchiveError(
            f"Cannot write the archive of session {record.session_id!r} in {folder}: "
            f"{exc.strerror or exc}; the session was not deleted.",
            session_id=record.session_id, path=str(folder)) from exc
    finally:
        await asyncio.to_thread(_remove, partial)


def verify_archive(record: SessionRecord, seen: ExportedLog, data: bytes, *,
                   path: Path) -> None:
    """Raise ArchiveError unless ``data`` parses as an export of ``record``'s session whose
    header, events, chain hashes and artifact versions equal what the export read from the
    store (``seen``: the log at ``record.version``, whose rows never change)."""
    sid = record.session_id

    def refuse(why: str) -> ArchiveError:
        return ArchiveError(f"The archive {path} of session {sid!r} does not match the log: "
                            f"{why}; the session was not deleted.", session_id=sid,
                            path=str(path))

    try:
        parsed = parse_export(data.splitlines())
    except ExportFormatError as exc:
        raise refuse(f"it does not read back as an export ({exc})") from exc
    if (parsed.app_name, parsed.user_id, parsed.session_id, parsed.created_at) != (
            record.app_name, record.user_id, sid, record.created_at):
        raise refuse("its header names another session")
    if len(parsed.events) != record.version or len(seen.events) != record.version:
        raise refuse(f"it holds {len(parsed.events)} events, not {record.version}")
    for event, stored in zip(parsed.events, seen.events, strict=True):
        if with_seq(event, stored.seq) != stored:
            raise refuse(f"its event at seq {stored.seq} differs from the stored one")
    if parsed.chain_hashes is not None and parsed.chain_hashes != seen.chain_hashes:
        raise refuse("its chain hashes differ from the stored ones")
    if parsed.artifacts != seen.artifacts:
        raise refuse("its artifact versions differ from the stored ones")


def _remove(partial: Path) -> None:
    with contextlib.suppress(OSError):  # never there, or its directory could not be made
        partial.unlink(missing_ok=True)


def _make_dirs(folder: Path) -> None:
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    if created:  # the new directory's entry must survive a crash too
        _fsync_dir(folder.parent)


def _place(partial: Path, folder: Path, stem: str, data: bytes) -> Path:
    """Give the synced partial file its final name without replacing any other file, and sync
    the directory; an identical archive already there is kept as it is."""
    number = 0
    while True:
        final = folder / (f"{stem}.jsonl" if number == 0 else f"{stem}.{number}.jsonl")
        try:
            os.link(partial, final)
        except FileExistsError:
            if final.read_bytes() == data:
                return final
            number += 1
            continue
        _fsync_dir(folder)
        return final


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
