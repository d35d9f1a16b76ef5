"""The session export format (JSON Lines) and its validation: pure, no I/O.

Line 1 is a header naming the format, its version, the session's app, user, id and creation
time, and how many events and artifact versions follow. Then one line per event, as the codec
encodes it (``encode_event``: the exact stored JSON, without ``seq``, which is the line's
position), oldest first. Then one line per artifact version, ``{"artifact": {"filename",
"version", "mime_type", "created_at", "data"}}`` with the bytes in base64, by filename and
version.

Which artifact versions an export holds (format version 2):

- every version of every session-scoped artifact: they belong to the session alone;
- for each ``user:`` artifact the session's events refer to (``artifact_delta`` or an artifact
  part), versions 0 up to the newest version referred to — the earlier ones are needed for the
  version numbers to come out the same on import. ``user:`` artifacts are shared by all the
  user's sessions, so import never changes a version the target already holds (see
  ``evs import``).

The header may carry the exporting store's hash chain (``"chain": {"hashes": [hex …],
"signatures": [hex or null …]}``, one per event; ``eventstore._chain``) when every row was
stored in the current encoding (so an importer re-encoding the events gets the same bytes):
``evs import`` checks the events against it and refuses a broken chain. Signatures bind the
exporting session id; an importing keyed store signs the events again.

Each artifact's versions must be exactly 0..n: an export lacking a version in the middle is
refused, because the importing store numbers versions itself and every later one would shift.
Import validates every line before anything is written. Version 1 exports (no artifacts) are
still read.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ._codec import SCHEMA_VERSION, decode_event, encode_event
from ._events import Event
from ._exceptions import EventStoreError
from ._state import USER_PREFIX

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "Export",
    "ExportFormatError",
    "ExportHeader",
    "ExportedArtifact",
    "check_artifact_versions",
    "check_counts",
    "dump_artifact",
    "dump_event",
    "dump_header",
    "parse_export",
    "parse_header",
    "parse_line",
    "referenced_artifacts",
]

EXPORT_FORMAT = "agent-eventstore/session"
"""The ``format`` value of an export's header line."""

EXPORT_VERSION = 2
"""Version of the export format this code writes (it reads 1 and 2)."""

_READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportedArtifact:
    """One artifact version of an export."""

    filename: str
    """Artifact filename; a ``user:`` prefix means user-scoped."""
    version: int
    """Version number in the exporting store (0, 1, 2 …); import reproduces it."""
    mime_type: str
    """MIME type it was saved with."""
    created_at: float
    """Save time in the exporting store (seconds since the epoch)."""
    data: bytes
    """The bytes."""

    @property
    def user_scoped(self) -> bool:
        """Whether the artifact is shared by the user's sessions (``user:`` prefix)."""
        return self.filename.startswith(USER_PREFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class Export:
    """A parsed, fully validated export."""

    app_name: str
    """App of the exported session."""
    user_id: str
    """User of the exported session."""
    session_id: str
    """Id of the exported session."""
    created_at: float | None
    """Creation time of the exported session (None in exports that lack it)."""
    events: list[Event]
    """The events, oldest first (``seq`` unset)."""
    artifacts: list[ExportedArtifact]
    """The artifact versions, by filename and then version 0, 1, 2 … without gaps."""
    chain_hashes: list[bytes] | None = None
    """The exporting store's chain hash of each event, when the export carries them."""
    chain_signatures: list[bytes | None] | None = None
    """The exporting store's signature of each event (None: unsigned), when the export carries
    its chain."""


class ExportFormatError(EventStoreError):
    """An export file is not valid; ``line`` is the 1-based line number."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def dump_header(*, app_name: str, user_id: str, session_id: str, events: int,
                created_at: float, artifacts: int = 0,
                chain: Sequence[tuple[bytes, bytes | None]] | None = None) -> bytes:
    """Return the header line (without newline); ``chain`` holds each event's chain hash and
    signature (see the module docstring)."""
    extra: dict[str, Any] = {}
    if chain is not None:
        extra["chain"] = {"hashes": [h.hex() for h, _ in chain],
                          "signatures": [None if s is None else s.hex() for _, s in chain]}
    return orjson.dumps({
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "created_at": created_at,
        "events": events,
        "artifacts": artifacts,
        **extra,
    })


def dump_event(event: Event) -> bytes:
    """Return one event line (without newline): the codec's JSON."""
    return encode_event(event)


def dump_artifact(artifact: ExportedArtifact) -> bytes:
    """Return one artifact line (without newline), the bytes in base64."""
    return orjson.dumps({"artifact": {
        "filename": artifact.filename,
        "version": artifact.version,
        "mime_type": artifact.mime_type,
        "created_at": artifact.created_at,
        "data": base64.b64encode(artifact.data).decode("ascii"),
    }})


def referenced_artifacts(events: Iterable[Event]) -> dict[str, int]:
    """Return filename -> the newest version the events refer to, through ``artifact_delta``
    or artifact parts."""
    newest: dict[str, int] = {}

    def refer(filename: str, version: int) -> None:
        newest[filename] = max(version, newest.get(filename, version))

    for event in events:
        for filename, version in event.actions.artifact_delta.items():
            refer(filename, version)
        if event.content is not None:
            for part in event.content.parts:
                if part.artifact is not None:
                    refer(part.artifact.filename, part.artifact.version)
    return newest


def _string(header: dict[str, Any], key: str) -> str:
    value = header.get(key)
    if not isinstance(value, str) or not value:
        raise ExportFormatError(1, f"the header needs a non-empty string {key!r}.")
    return value


def _artifact(number: int, raw: Any) -> ExportedArtifact:
    if not isinstance(raw, dict):
        raise ExportFormatError(number, "an artifact line needs an object under 'artifact'.")
    filename = raw.get("filename")
    version = raw.get("version")
    mime_type = raw.get("mime_type")
    created_at = raw.get("created_at")
    data = raw.get("data")
    if not isinstance(filename, str) or not filename:
        raise ExportFormatError(number, "the artifact needs a non-empty string 'filename'.")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ExportFormatError(number, f"artifact {filename!r} needs an integer 'version' "
                                ">= 0.")
    if not isinstance(mime_type, str):
        raise ExportFormatError(number, f"artifact {filename!r} version {version} needs a "
                                "string 'mime_type'.")
    if (isinstance(created_at, bool) or not isinstance(created_at, (int, float))
            or not math.isfinite(created_at)):
        raise ExportFormatError(number, f"artifact {filename!r} version {version} needs a "
                                "number 'created_at'.")
    if not isinstance(data, str):
        raise ExportFormatError(number, f"artifact {filename!r} version {version} needs its "
                                "bytes as a base64 string 'data'.")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ExportFormatError(number, f"artifact {filename!r} version {version}: 'data' is "
                                f"not valid base64 ({exc}).") from exc
    return ExportedArtifact(filename=filename, version=version, mime_type=mime_type,
                            created_at=float(created_at), data=decoded)


def _check_versions(artifacts: dict[tuple[str, int], tuple[int, ExportedArtifact]]) -> None:
    """Refuse an artifact whose versions are not exactly 0..n."""
    by_name: dict[str, dict[int, int]] = {}
    for (filename, version), (number, _) in artifacts.items():
        by_name.setdefault(filename, {})[version] = number
    for filename, versions in by_name.items():
        missing = sorted(set(range(max(versions) + 1)) - set(versions))
        if missing:
            after = min(v for v in versions if v > missing[0])
            listed = ", ".join(map(str, missing))
            raise ExportFormatError(
                versions[after],
                f"artifact {filename!r} has version {after} but lacks version(s) {listed}; "
                "versions must be 0..n without gaps, or the imported numbers would differ.",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportHeader:
    """A validated header line (``parse_header``): what a reader needs before the events."""

    line: int
    """Its line number."""
    format_version: int
    """The export format version (1 or 2)."""
    schema_version: int
    """The event schema version the event lines are in."""
    app_name: str
    """App of the exported session."""
    user_id: str
    """User of the exported session."""
    session_id: str
    """Id of the exported session."""
    created_at: float | None
    """Creation time of the exported session (None in exports that lack it)."""
    events: int | None
    """How many event lines the header announces (None: it does not say)."""
    artifacts: int | None
    """How many artifact lines the header announces (None: it does not say)."""
    chain: bytes | None = None
    """The exporting store's chain hash of each event, 32 bytes each, one after the other
    (one bytes object, not a list, so that a long log's chain stays small), or None."""
    chain_signatures: list[bytes | None] | None = None
    """Each event's signature (None: unsigned) when the chain is carried and any is signed."""

    def chain_hash(self, seq: int) -> bytes:
        """The carried chain hash of the event at ``seq`` (the chain must be carried)."""
        assert self.chain is not None
        return self.chain[32 * (seq - 1):32 * seq]

    def signature(self, seq: int) -> bytes | None:
        """The carried signature of the event at ``seq``, None when unsigned."""
        return None if self.chain_signatures is None else self.chain_signatures[seq - 1]


def parse_header(first: int, raw_header: bytes) -> ExportHeader:
    """Parse and validate the header line (line number ``first``); raise ExportFormatError."""
    try:
        header = orjson.loads(raw_header)
    except orjson.JSONDecodeError as exc:
        raise ExportFormatError(first, f"the header is not valid JSON ({exc}).") from exc
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(first, f"not an export: the header's format must be "
                                f"{EXPORT_FORMAT!r}.")
    format_version = header.get("version")
    if format_version not in _READABLE_VERSIONS:
        readable = " and ".join(map(str, _READABLE_VERSIONS))
        raise ExportFormatError(first, f"export format version {format_version!r} is "
                                f"not supported (this code reads {readable}).")
    schema_version = header.get("schema_version")
    if not isinstance(schema_version, int) or schema_version < 1:
        raise ExportFormatError(first, "the header needs an integer 'schema_version'.")
    app_name = _string(header, "app_name")
    user_id = _string(header, "user_id")
    session_id = _string(header, "session_id")
    created_at = header.get("created_at")
    if created_at is not None and (isinstance(created_at, bool)
                                   or not isinstance(created_at, (int, float))):
        raise ExportFormatError(first, "the header's 'created_at' must be a number.")
    declared = header.get("events")
    events = declared if isinstance(declared, int) and not isinstance(declared, bool) else None
    declared = header.get("artifacts")
    artifacts = (declared if isinstance(declared, int) and not isinstance(declared, bool)
                 else None)
    raw_chain = header.get("chain")
    chain = signatures = None
    if raw_chain is not None:
        hashes = raw_chain.get("hashes") if isinstance(raw_chain, dict) else None
        if events is None or not isinstance(hashes, list) or len(hashes) != events:
            raise ExportFormatError(first, f"the header's 'chain' must hold {events} "
                                    "'hashes' (one per event the header announces).")
        chain = b"".join(_chain(first, raw_chain, events) or ())
        signatures = _signatures(first, raw_chain, events)
        if all(s is None for s in signatures):
            signatures = None
    return ExportHeader(
        line=first, format_version=format_version, schema_version=schema_version,
        app_name=app_name, user_id=user_id, session_id=session_id,
        created_at=float(created_at) if created_at is not None else None,
        events=events, artifacts=artifacts, chain=chain, chain_signatures=signatures)


def _looks_like_artifact(line: bytes) -> bool:
    """Whether the line's first key is ``artifact`` (only then is it parsed as one: an event
    line is parsed once, by the codec)."""
    head = line.lstrip()
    return head.startswith(b"{") and head[1:].lstrip().startswith(b'"artifact"')


def parse_line(number: int, line: bytes, header: ExportHeader, *,
               encodable: bool = True) -> Event | ExportedArtifact:
    """Parse and validate one line after the header: an event (``seq`` unset) or, in format
    2, an artifact version; raise ExportFormatError naming the line. ``encodable=False``
    leaves out checking that the event can be encoded again, for a caller that encodes it
    next anyway (``evs import``)."""
    if header.format_version >= 2 and _looks_like_artifact(line):
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            raw = None  # reported below, as for any line that is not an event
        if isinstance(raw, dict) and list(raw) == ["artifact"]:
            return _artifact(number, raw["artifact"])
    try:
        event = decode_event(line, schema_version=header.schema_version)
        if encodable:
            encode_event(event)
    except (ValueError, EventStoreError) as exc:
        reason = " ".join(str(exc).split())
        raise ExportFormatError(number, f"not a valid event: {reason}") from exc
    return event


def check_counts(header: ExportHeader, last_line: int, events: int, artifacts: int) -> None:
    """Refuse a file whose event or artifact lines are not as many as the header announces."""
    if header.events is not None and header.events != events:
        raise ExportFormatError(last_line, f"the header announces {header.events} events but "
                                f"the file has {events} (truncated?).")
    if header.artifacts is not None and header.artifacts != artifacts:
        raise ExportFormatError(last_line, f"the header announces {header.artifacts} artifact "
                                f"versions but the file has {artifacts} (truncated?).")


def check_artifact_versions(artifacts: Iterable[tuple[int, ExportedArtifact]]
                            ) -> list[ExportedArtifact]:
    """Refuse a repeated artifact version and versions that are not exactly 0..n (each
    ``(line number, artifact)``); return the artifacts by filename and version."""
    seen: dict[tuple[str, int], tuple[int, ExportedArtifact]] = {}
    for number, artifact in artifacts:
        key = (artifact.filename, artifact.version)
        if key in seen:
            raise ExportFormatError(number, f"artifact {key[0]!r} version {key[1]} "
                                    f"already appears on line {seen[key][0]}.")
        seen[key] = (number, artifact)
    _check_versions(seen)
    return [seen[key][1] for key in sorted(seen)]


def parse_export(lines: Iterable[bytes]) -> Export:
    """Parse and validate a whole export; raise ExportFormatError naming the first bad line.
    (It holds every event: ``evs import`` reads a file a page at a time with ``parse_header``
    and ``parse_line`` instead.)"""
    numbered: Sequence[tuple[int, bytes]] = [
        (n, line) for n, line in enumerate(lines, start=1) if line.strip()
    ]
    if not numbered:
        raise ExportFormatError(1, "the file is empty; expected a header line.")
    header = parse_header(*numbered[0])
    events: list[Event] = []
    seen: dict[str, int] = {}
    artifacts: list[tuple[int, ExportedArtifact]] = []
    for number, line in numbered[1:]:
        item = parse_line(number, line, header)
        if isinstance(item, ExportedArtifact):
            artifacts.append((number, item))
            continue
        if item.id in seen:
            raise ExportFormatError(number, f"event id {item.id!r} already appears on line "
                                    f"{seen[item.id]}.")
        seen[item.id] = number
        events.append(item)
    check_counts(header, numbered[-1][0], len(events), len(artifacts))
    ordered = check_artifact_versions(artifacts)
    chain = header.chain
    return Export(
        app_name=header.app_name,
        user_id=header.user_id,
        session_id=header.session_id,
        created_at=header.created_at,
        events=events,
        artifacts=ordered,
        chain_hashes=None if chain is None else [chain[i:i + 32]
                                                  for i in range(0, len(chain), 32)],
        chain_signatures=None if chain is None else (header.chain_signatures
                                                     or [None] * len(events)),
    )


def _chain(line: int, raw: Any, count: int) -> list[bytes] | None:
    if raw is None:
        return None
    hashes = raw.get("hashes") if isinstance(raw, dict) else None
    if not isinstance(hashes, list) or len(hashes) != count:
        raise ExportFormatError(line, f"the header's 'chain' must hold {count} 'hashes'.")
    out = []
    for value in hashes:
        try:
            digest = bytes.fromhex(value) if isinstance(value, str) else b""
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise ExportFormatError(line, f"the header's chain hash {value!r} is not 64 hex "
                                    "digits.")
        out.append(digest)
    return out


def _signatures(line: int, raw: dict[str, Any], count: int) -> list[bytes | None]:
    values = raw.get("signatures")
    if values is None:
        return [None] * count
    if not isinstance(values, list) or len(values) != count:
        raise ExportFormatError(line, f"the header's chain 'signatures' must hold {count} "
                                "values (hex or null).")
    out: list[bytes | None] = []
    for value in values:
        try:
            out.append(None if value is None else bytes.fromhex(value))
        except (TypeError, ValueError) as exc:
            raise ExportFormatError(line, f"the header's chain signature {value!r} is not "
                                    "hex.") from exc
    return out
