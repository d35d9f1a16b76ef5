"""Progress on stderr for the long commands (``export``, ``import``, ``verify``).

Shown only when stderr is a terminal and the job is large, so pipes, scripts and ``--json``
output never see it; stdout is never touched.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
)

__all__ = ["LARGE", "Tracker", "progress"]

LARGE = 2_000
"""A job with at least this many items (events, sessions) shows progress."""


class Tracker:
    """What a job reports its progress to (does nothing when progress is not shown)."""

    def __init__(self, bar: Progress | None = None, task: TaskID | None = None) -> None:
        self._bar = bar
        self._task = task

    def advance(self, amount: int = 1) -> None:
        """Count ``amount`` more items done."""
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, amount)


def _shown(size: int | None) -> bool:
    if os.environ.get("EVS_NO_PROGRESS"):
        return False
    if size is not None and size < LARGE:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress(description: str, *, total: int | None, size: int | None = None) -> Iterator[Tracker]:
    """Show a progress bar (``total`` items) or a spinner (``total`` None) on stderr while the
    block runs, when stderr is a terminal and ``size`` (default ``total``) is large."""
    if not _shown(size if size is not None else total):
        yield Tracker()
        return
    columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    bar = Progress(*columns, console=Console(stderr=True, highlight=False, markup=False),
                   transient=True)
    with bar:
        task = bar.add_task(description, total=total)
        yield Tracker(bar, task)
