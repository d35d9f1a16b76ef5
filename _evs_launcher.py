"""The ``evs`` console script's entry point: Ctrl-C while ``evs`` is still starting up.

Importing the command line (``runtime``, ``eventstore``, typer, rich, SQLAlchemy) takes a second
or two, and until ``run_app`` runs nothing of ours is there to turn Ctrl-C into one line and
status 130: Python would print a ``KeyboardInterrupt`` traceback from deep inside an import.
This module imports only the standard library, so it is loaded before the first Ctrl-C can land
and catches one that lands during the imports. (It is a top-level module because a module inside
``runtime`` would have ``runtime/__init__.py`` imported first.)

``python -m runtime.cli`` cannot start here: Python imports ``runtime`` before any code of
``runtime.cli`` runs. So ``runtime/__init__.py`` calls ``guard_startup`` first thing, which
makes Ctrl-C during those imports the same one line and status 130; ``run_app`` hands Ctrl-C
back to Python (a ``KeyboardInterrupt`` it reports) once the command line is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["guard_startup", "main"]

_INTERRUPTED = 130  # runtime.cli's EXIT_INTERRUPTED (128 + SIGINT), which cannot be imported yet


def main() -> None:
    """Run ``evs``; Ctrl-C during start-up is ``evs: interrupted.`` and exit status 130."""
    try:
        from runtime.cli import main as evs_main
    except KeyboardInterrupt:
        sys.stderr.write("evs: interrupted.\n")
        raise SystemExit(_INTERRUPTED) from None
    evs_main()


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    # Nothing is open yet (no database, no output): ending at once loses nothing.
    os.write(2, b"evs: interrupted.\n")
    os._exit(_INTERRUPTED)


def guard_startup(module: str) -> None:
    """When this process is ``python -m MODULE`` still importing its packages (``sys.argv[0]``
    is ``-m`` until then), make Ctrl-C print ``evs: interrupted.`` and exit with status 130
    instead of a ``KeyboardInterrupt`` traceback; otherwise (a library import) do nothing."""
    if sys.argv[:1] != ["-m"]:
        return
    argv = list(getattr(sys, "orig_argv", []))
    for n, word in enumerate(argv):
        if (word == "-m" and argv[n + 1:n + 2] == [module]) or word == f"-m{module}":
            signal.signal(signal.SIGINT, _interrupted_while_starting)
            return
        if word == "-m" or word.startswith("-m"):
            return  # another module is being run


def startup_guarded() -> bool:
    """Whether ``guard_startup`` holds Ctrl-C (``run_app`` then hands it back to Python)."""
    return signal.getsignal(signal.SIGINT) is _interrupted_while_starting
