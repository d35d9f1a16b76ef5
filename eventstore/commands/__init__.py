"""The store's ``evs`` commands, and the toolkit every ``evs`` command is built with.

This package is half of the one ``evs`` command line: ``app`` holds the commands that need
nothing but the store (``sessions``, ``show``, ``state``, ``tail``, ``verify``, ``export``,
``import``, ``delete``, ``fork``, ``prune``, ``heads`` and the ``db``, ``memory`` and
``retention`` groups), and the toolkit (options, one-line errors, ``run_app``, the timeline and
its rendering) is what ``runtime.cli`` builds the rest with. ``runtime.cli`` is the ``evs``
console script: this app plus the commands that drive the runtime (``eventstore`` never imports
``runtime``). ``python -m eventstore.commands`` (or its old name, ``python -m eventstore.cli``)
runs this app alone, for a machine with only the store.

Every command takes ``--db URL`` (or ``EVS_DATABASE_URL``; default ``./evs.db``) and ``--json``.
Read commands open the database read-only and never change it. Errors are one line on stderr and
a non-zero exit status.
"""

from ._app import app, standalone
from ._common import (
    DEFAULT_DB,
    AppOption,
    CliError,
    DbOption,
    JsonOption,
    UserOption,
    address_flags,
    console,
    errors,
    open_existing,
    print_json,
    printable,
    prog,
    run,
    run_app,
    shared_address,
)
from ._exchange import Export, ExportedArtifact, ExportFormatError, dump_artifact, parse_export
from ._inspect import confirm_command
from ._maintain import verify_session
from ._render import event_entry, print_event, short_json
from ._timeline import Timeline, analyze
from ._verify import Finding

__all__ = [
    "DEFAULT_DB",
    "AppOption",
    "CliError",
    "DbOption",
    "Export",
    "ExportFormatError",
    "ExportedArtifact",
    "Finding",
    "JsonOption",
    "Timeline",
    "UserOption",
    "address_flags",
    "analyze",
    "app",
    "confirm_command",
    "console",
    "dump_artifact",
    "errors",
    "event_entry",
    "main",
    "open_existing",
    "parse_export",
    "print_event",
    "print_json",
    "printable",
    "prog",
    "run",
    "run_app",
    "shared_address",
    "short_json",
    "verify_session",
]


def main() -> None:
    """Run the store-only commands (``python -m eventstore.commands``)."""
    run_app(standalone)
