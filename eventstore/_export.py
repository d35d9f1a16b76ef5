"""Writing one session in the export format (``eventstore._exchange``): what ``evs export``
writes and what ``EventStore.prune`` archives, from one writer.

The log is read a page at a time up to the version the caller's record names, so an export
describes exactly that version however many events are appended meanwhile; memory stays flat in
the log's length: the event lines and the chain the header carries (each event's hash and
signature, as the header's JSON) go to temporary files until the header can be written.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import BinaryIO

from ._events import Event
from ._exceptions import ArtifactNotFoundError
from ._exchange import (
    ExportedArtifact,
    dump_artifact,
    dump_event,
    dump_header,
    referenced_artifacts,
)
from ._state import USER_PREFIX
from ._statefold import decode_all, in_seq_order
from ._stored import STORED_SCHEMA_VERSION
from .backends.protocol import Backend, SessionRecord, check_served_artifact

__all__ = ["EXPORT_PAGE", "ExportedLog", "export_artifacts", "write_export"]

EXPORT_PAGE = 1000
"""Events read, decoded and written per step."""


@dataclass(slots=True)
class ExportedLog:
    """What an export read from the store (for a caller that checks the written file against
    it: ``eventstore._archive``)."""

    events: list[Event] = field(default_factory=list)
    """The events as decoded from the log, ``seq`` set, oldest first."""
    chain_hashes: list[bytes | None] = field(default_factory=list)
    """Each event row's chain hash as stored."""
    artifacts: list[ExportedArtifact] = field(default_factory=list)
    """The artifact versions the export holds."""


async def export_artifacts(
    backend: Backend, record: SessionRecord, referenced: dict[str, int]
) -> list[ExportedArtifact]:
    """Every version of the session's own artifacts, and versions 0 up to the newest referred
    to (``referenced``: filename -> version) of the ``user:`` artifacts (see ``_exchange``)."""
    app, user, sid = record.app_name, record.user_id, record.id  # artifacts: the given id
    own = await backend.list_artifacts(app_name=app, user_id=user, session_id=sid)
    shared = await backend.list_artifacts(app_name=app, user_id=user, session_id=None)
    wanted: dict[str, tuple[str | None, list[int]]] = {
        name: (sid, versions) for name, versions in own.items()
        if not name.startswith(USER_PREFIX)
    }
    for name, newest in referenced.items():
        if name.startswith(USER_PREFIX):
            wanted[name] = (None, [v for v in shared.get(name, []) if v <= newest])
    found: list[ExportedArtifact] = []
    for name, (scope, versions) in sorted(wanted.items()):
        for version in versions:
            artifact = await backend.load_artifact(app_name=app, user_id=user,
                                                   session_id=scope, filename=name,
                                                   version=version)
            if artifact is None:  # deleted since it was listed
                raise ArtifactNotFoundError(sid, name, version)
            check_served_artifact(artifact, backend.signing_key, scope=scope)
            found.append(ExportedArtifact(filename=name, version=artifact.version,
                                          mime_type=artifact.mime_type,
                                          created_at=artifact.created_at, data=artifact.data))
    return found


async def write_export(backend: Backend, record: SessionRecord, sink: BinaryIO, *,
                       seen: ExportedLog | None = None) -> int:
    """Write the export of ``record``'s session at ``record.version`` to ``sink`` (flushed,
    not closed) and return how many events it holds; ``seen``, when given, receives what was
    read (memory then grows with the log).

    The header comes first but names every event's chain hash, so the event lines go to a
    temporary file while the log is read and follow the header once it is known. Raises
    SessionNotFoundError when the session is deleted meanwhile."""
    sid, version = record.session_id, record.version
    chained, links = True, 0
    referenced: dict[str, int] = {}
    count = 0
    with tempfile.TemporaryFile() as body, tempfile.TemporaryFile() as hashes, \
            tempfile.TemporaryFile() as signatures:
        after = 0
        while after < version:
            rows = await backend.read(sid, after=after, upto=version, backwards=False,
                                      limit=EXPORT_PAGE)
            if not rows:
                break
            events = decode_all(in_seq_order(sid, rows, after=after, upto=version))
            for name, number in referenced_artifacts(events).items():
                referenced[name] = max(number, referenced.get(name, number))
            # The chain is worth carrying only when an importer re-encoding the events gets
            # the stored bytes back: every row in the current encoding, every row hashed.
            hash_items: list[bytes] = []
            signature_items: list[bytes] = []
            for row in rows:
                if row.chain_hash is None or row.schema_version != STORED_SCHEMA_VERSION:
                    chained = False
                elif chained:
                    hash_items.append(b'"%s"' % row.chain_hash.hex().encode())
                    signature_items.append(b"null" if row.signature is None
                                           else b'"%s"' % row.signature.hex().encode())
            if chained and hash_items:
                comma = b"," if links else b""
                await asyncio.to_thread(hashes.write, comma + b",".join(hash_items))
                await asyncio.to_thread(signatures.write, comma + b",".join(signature_items))
                links += len(hash_items)
            if seen is not None:
                seen.events += events
                seen.chain_hashes += [row.chain_hash for row in rows]
            page = b"".join(dump_event(e) + b"\n" for e in events)
            await asyncio.to_thread(body.write, page)
            count += len(events)
            after = rows[-1].seq
        artifacts = await export_artifacts(backend, record, referenced)
        if seen is not None:
            seen.artifacts = artifacts
        header = dump_header(app_name=record.app_name, user_id=record.user_id,
                             session_id=record.id, events=count,
                             created_at=record.created_at,
                             artifacts=len(artifacts))
        carried = (hashes, signatures) if chained and links == count else None
        await asyncio.to_thread(_assemble, sink, header, carried, body, artifacts)
    return count


def _assemble(sink: BinaryIO, header: bytes, chain: tuple[BinaryIO, BinaryIO] | None,
              body: BinaryIO, artifacts: list[ExportedArtifact]) -> None:
    if chain is None:
        sink.write(header + b"\n")
    else:
        # What ``dump_header(chain=…)`` writes: the chain is the header's last key.
        hashes, signatures = chain
        sink.write(header[:-1] + b',"chain":{"hashes":[')
        hashes.seek(0)
        shutil.copyfileobj(hashes, sink, 1 << 20)
        sink.write(b'],"signatures":[')
        signatures.seek(0)
        shutil.copyfileobj(signatures, sink, 1 << 20)
        sink.write(b"]}}\n")
    body.seek(0)
    shutil.copyfileobj(body, sink, 1 << 20)
    for artifact in artifacts:
        sink.write(dump_artifact(artifact) + b"\n")
    sink.flush()
