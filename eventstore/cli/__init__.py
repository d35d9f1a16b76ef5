"""The ``evs`` command line: inspect, verify, export/import, migrate and demo a store.

Every command takes ``--db URL`` (or ``EVS_DATABASE_URL``; default ``./evs.db``) and ``--json``.
Read commands open the database read-only and never change it. Errors are one line on stderr and
a non-zero exit status.
"""

from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the ``evs`` command line (the console script's entry point)."""
    app()
