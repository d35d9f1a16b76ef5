"""The ``evs`` command line (the console script): the store-only commands of
``eventstore.cli`` plus the commands that drive the runtime — ``demo`` (the weather agent on the
embedded SQLite store), ``pending``, ``confirm``, ``respond`` and ``rerun``.

Every command takes ``--db URL`` (or ``EVS_DATABASE_URL``; default ``./evs.db``). Errors, usage
errors included, are one line on stderr and a non-zero exit status (2 for bad usage).
"""

from eventstore.cli import run_app

from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the ``evs`` command line (the console script's entry point)."""
    run_app(app)
