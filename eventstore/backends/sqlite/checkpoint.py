"""WAL checkpoints off the append path: a thread with its own connection copies committed WAL
frames into the database file while the writer goes on committing.

SQLite checkpoints a WAL file from inside the ``COMMIT`` that takes it past
``wal_autocheckpoint`` pages: that commit copies every frame into the database file and syncs
it, so one append in a few hundred pays for all of them, and on this project's machines that
share of the cost was more than a third of an append's time on the writer thread. The writer
therefore runs with a high ``wal_autocheckpoint`` (``WRITER_AUTOCHECKPOINT``: a safety net for
a checkpointer that falls behind) and tells a ``Checkpointer`` after every write job; the
checkpointer waits ``DELAY`` seconds for more commits to gather, then runs one ``PASSIVE``
checkpoint. A passive checkpoint never blocks the writer or readers (it copies what no reader
still needs and stops there), and once every frame is copied the writer's next transaction
starts the WAL file over, so the file stays about as small as with automatic checkpoints.

Durability is SQLite's own: a checkpoint only copies frames that are already committed (and,
with ``synchronous=FULL``, already synced) in the WAL; a crash at any moment leaves them there
for the next opener. A checkpoint that fails (the file is busy with another process's
checkpoint, say) is retried after the next commit; the writer's own automatic checkpoint
remains the backstop.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from typing import Final

from .driver import BUSY_TIMEOUT_MS

__all__ = ["DELAY", "WRITER_AUTOCHECKPOINT", "Checkpointer"]

DELAY: Final = 0.02
"""Seconds a checkpoint waits after the commit that woke it, to take many commits at once."""

WRITER_AUTOCHECKPOINT: Final = 16_000
"""The writer's ``wal_autocheckpoint`` (pages, ~64 MB) while a checkpointer runs: only reached
when the checkpointer cannot keep up."""


class Checkpointer:
    """Runs ``PASSIVE`` checkpoints of one SQLite file on its own thread and connection, soon
    after ``notify()`` says the writer committed; ``stop()`` ends it (see the module docstring).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stopping = False
        self.checkpoints = 0
        """How many checkpoints ran (for tests)."""
        self._thread = threading.Thread(target=self._main, name=f"evs-sqlite-checkpoint:{path}",
                                        daemon=True)

    def start(self) -> None:
        """Start the thread (its connection opens there)."""
        self._thread.start()

    def notify(self) -> None:
        """Say that the writer committed (called on the writer thread after each write job)."""
        if not self._wake.is_set():
            self._wake.set()

    def stop(self) -> None:
        """End the thread, after the checkpoint in progress if any (blocking: call it from a
        worker thread)."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def _main(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=True)
        except sqlite3.Error:
            return  # the writer's own automatic checkpoints remain
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            while True:
                self._wake.wait()
                if self._stopping:
                    return
                time.sleep(DELAY)
                self._wake.clear()
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                if self._stopping:
                    return
        finally:
            conn.close()
