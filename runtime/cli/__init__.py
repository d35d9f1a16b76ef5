"""The ``evs`` command line (the console script, and ``python -m runtime.cli``).

One program in two packages, because ``eventstore`` never imports ``runtime``: the store's
commands and the toolkit they are built with are ``eventstore.commands``; this package mounts
them and adds the commands that drive the runtime — ``demo`` (the weather agent on the embedded
SQLite store), ``pending``, ``confirm``, ``respond``, ``rerun``, ``compact``, ``web`` and
``mcp-server``. The console script starts in ``_evs_launcher`` (Ctrl-C during the imports).

Every command takes ``--db URL`` (or ``EVS_DATABASE_URL``; default ``./evs.db``). Errors, usage
errors included, are one line on stderr and a non-zero exit status (2 for bad usage).
"""

from eventstore.commands import run_app

from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the ``evs`` command line (the console script's entry point)."""
    run_app(app)
