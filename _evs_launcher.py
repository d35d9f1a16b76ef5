"""The ``evs`` console script's entry point: Ctrl-C while ``evs`` is still starting up.

Importing the command line (``runtime``, ``eventstore``, typer, rich, SQLAlchemy) takes a second
or two, and until ``run_app`` runs nothing of ours is there to turn Ctrl-C into one line and
status 130: Python would print a ``KeyboardInterrupt`` traceback from deep inside an import.
This module imports only the standard library, so it is loaded before the first Ctrl-C can land
and catches one that lands during the imports. (It is a top-level module because a module inside
``runtime`` would have ``runtime/__init__.py`` imported first.)
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_INTERRUPTED = 130  # runtime.cli's EXIT_INTERRUPTED (128 + SIGINT), which cannot be imported yet


def main() -> None:
    """Run ``evs``; Ctrl-C during start-up is ``evs: interrupted.`` and exit status 130."""
    try:
        from runtime.cli import main as evs_main
    except KeyboardInterrupt:
        sys.stderr.write("evs: interrupted.\n")
        raise SystemExit(_INTERRUPTED) from None
    evs_main()
