"""The session export format, where the CLI's modules (and older imports) find it: it lives in
``eventstore._exchange``, below the store, so that ``EventStore.prune`` writes archives in the
same format as ``evs export``."""

from .._exchange import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    Export,
    ExportedArtifact,
    ExportFormatError,
    dump_artifact,
    dump_event,
    dump_header,
    parse_export,
    referenced_artifacts,
)

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "Export",
    "ExportFormatError",
    "ExportedArtifact",
    "dump_artifact",
    "dump_event",
    "dump_header",
    "parse_export",
    "referenced_artifacts",
]
