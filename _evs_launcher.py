"""The ``evs`` console script's entry point: Ctrl-C while ``evs`` is still starting up.

Importing the command line (``runtime``, ``eventstore``, typer, rich, SQLAlchemy) takes a second
or two, and until ``run_app`` runs nothing of ours is there to turn Ctrl-C into one line and
status 130: Python would print a ``KeyboardInterrupt`` traceback from deep inside an import.
This module imports only the standard library, so it is loaded before the first Ctrl-C can land
and catches one that lands during the imports. (It is a top-level module because a module inside
``runtime`` would have ``runtime/__init__.py`` imported first.) docs/architecture.md, "The command
line", says which command lives where.

``python -m runtime.cli`` cannot start here: Python imports ``runtime`` before any code of
``runtime.cli`` runs. So ``runtime/__init__.py`` calls ``guard_startup`` first thing, which
makes Ctrl-C during those imports the same one line and status 130; ``run_app`` hands Ctrl-C
back to Python (a ``KeyboardInterrupt`` it reports) once the command line is loaded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

__all__ = ["guard_startup", "main", "run_then_exit"]

_INTERRUPTED = 130  # runtime.cli's EXIT_INTERRUPTED (128 + SIGINT), which cannot be imported yet


def main() -> None:
    """Run ``evs``; Ctrl-C during start-up is ``evs: interrupted.`` and exit status 130."""
    try:
        from runtime.cli import main as evs_main
    except KeyboardInterrupt:
        sys.stderr.write("evs: interrupted.\n")
        raise SystemExit(_INTERRUPTED) from None
    run_then_exit(evs_main)


def run_then_exit(command: Callable[[], None]) -> None:
    """Run ``command`` (a command line's ``main``, which ends by raising ``SystemExit`` with
    its status) as this process's last work: once it has returned or raised, Ctrl-C is
    ignored, so the status it chose is the process's. Only for a process about to exit."""
    try:
        command()
    except SystemExit as exc:
        if exc.code == _INTERRUPTED:
            # Interrupted and reported: end now. Python may otherwise still end the process by
            # SIGINT itself (status -2) when the KeyboardInterrupt passed through code it ran
            # in a nested interpreter frame, and nothing is left to finish after a Ctrl-C.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _flush_standard_streams()
            os._exit(_INTERRUPTED)
        raise
    finally:
        # Python's finalization gives SIGINT its default action back, and a Ctrl-C landing
        # then ends the process silently by the signal (status -2) after the command is done.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or broken: nothing reaches it
            stream.flush()


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
