"""Group commit for the SQLite writer: every write waiting at that moment, in one transaction.

One session appending awaits each commit, so it never has company: when the writer is idle
(``claim_alone``) its append is handed to the writer thread at once and commits in a
transaction of its own (no added latency, and none of the group's bookkeeping). Many sessions
appending at once queue behind the transaction in flight; when it ends, the writer takes *all*
of them and commits them together — one ``BEGIN IMMEDIATE`` … ``COMMIT`` (and, with
``synchronous=FULL``, one fsync) for the whole group. Groups are pipelined: a committed group's
answers are sent just before the next group's ``COMMIT``, so the event loop runs those callers
while the writer commits without the GIL (from idle, a large backlog is taken in two halves to
start the pipeline; see ``GroupCommit._drain``).

Each write keeps its own contract inside the group:

- a write that raises leaves nothing of itself: either it made at most one change (one
  statement: SQLite backs out a failing statement's changes, and earlier statements of the
  transaction stay) or it wraps its changes in ``savepoint(conn)``. So a version conflict, a
  duplicate id or a missing session fails only its caller, with the same typed error as an
  ungrouped write, and the others commit. (An append is one multi-row ``INSERT`` and no
  savepoint: every statement is a hop through the GIL, which the event loop's thread holds
  most of the time under load, so fewer statements per write is what makes groups cheap.)
- its caller is answered only after the ``COMMIT`` that holds it; if the transaction as a whole
  fails (``BEGIN`` or ``COMMIT`` refused, an I/O error that aborts it), every write of the group
  fails and nothing of it is stored;
- writes run in submission order, so one caller's appends to a session keep their order, and
  every write sees the writes before it in the group (versions, app positions). A run of
  consecutive appends goes to the ``batch`` function (``append.append_many``), which
  gives each the outcome running them one by one would give.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

__all__ = ["Batch", "GroupCommit", "Outcome", "savepoint"]

T = TypeVar("T")

_SAVEPOINT: Final = "evs_write"
_SPLIT_AT: Final = 16
"""From idle, a backlog of at least this many writes is taken in two halves (see ``_drain``)."""

Write = Callable[[sqlite3.Connection], Any]
Outcome = tuple[bool, Any]
"""``(failed, result)``: a write's result, or (``failed``) the exception it raised."""
Batch = Callable[[sqlite3.Connection, Sequence[Any]], list[Outcome]]
"""Runs a run of requests of one kind (appends) in few statements; returns each one's
outcome, as running them one after another would; raises only what fails the group."""
_Answer = tuple[asyncio.Future[Any], bool, Any]


@dataclass(slots=True)
class _Item:
    write: Write
    future: asyncio.Future[Any]
    request: Any


@contextlib.contextmanager
def savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the block's statements as one unit: on an exception they are rolled back (the
    transaction goes on) and the exception propagates. For writes that make several changes."""
    conn.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
            conn.execute(f"RELEASE {_SAVEPOINT}")
        raise
    conn.execute(f"RELEASE {_SAVEPOINT}")


class GroupCommit:
    """Collects writes and runs them on the writer thread in grouped transactions.

    ``post(job)`` hands a function to the writer thread (``Driver.post``); the group job it
    posts takes every write waiting at that moment, commits them, and loops while more arrived.
    ``max_group`` bounds how many writes one transaction holds (a long transaction would hold
    the file's lock from other processes for longer). ``on_failure`` runs (on the writer
    thread) after a group transaction failed and was rolled back.
    """

    def __init__(self, post: Callable[[Callable[[sqlite3.Connection], None]], None], *,
                 batch: Batch | None = None, max_group: int = 256,
                 on_failure: Callable[[], None] | None = None) -> None:
        self._post = post
        self._batch = batch
        self._on_failure = on_failure
        self._max_group = max_group
        self._lock = threading.Lock()
        self._waiting: list[_Item] = []
        self._armed = False
        self._alone_in_flight = 0
        self.groups = 0
        """How many transactions were committed or attempted (for tests and benchmarks)."""
        self.writes = 0
        """How many writes those transactions held."""
        self.alone = 0
        """How many writes ran in a transaction of their own (``claim_alone``)."""

    def claim_alone(self) -> bool:
        """Whether the writer is idle, nobody waiting and no write of its own in flight; if so
        the caller may run its write in a transaction of its own (cheaper than a group of one)
        and must call ``release_alone()`` once it is answered. Writes arriving meanwhile are
        grouped behind it, so a lone write never waits and a busy writer still groups."""
        with self._lock:
            if self._armed or self._alone_in_flight:
                return False
            self._alone_in_flight += 1
            self.alone += 1
            return True

    def release_alone(self) -> None:
        """End what ``claim_alone`` granted."""
        with self._lock:
            self._alone_in_flight -= 1

    async def run(self, write: Callable[[sqlite3.Connection], T], *, request: Any = None) -> T:
        """Run ``write`` in the next group transaction and return its result once committed.

        With ``request`` (an append), consecutive requests of a group run through the
        ``batch`` function instead, with the outcome ``write`` would have given. Raises what
        ``write`` raised (having changed nothing), or the driver error that failed the whole
        transaction. A cancelled caller's write still runs; its result is dropped.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        item = _Item(write, future, request if self._batch is not None else None)
        with self._lock:
            self._waiting.append(item)
            start = not self._armed
            self._armed = True
        if start:
            self._post(self._drain)
        return await future

    def _take(self, *, split: bool) -> list[_Item]:
        with self._lock:
            waiting = len(self._waiting)
            # From idle, a large backlog is taken in two halves, so that the pipeline in
            # _drain has a second group to prepare while the first one's callers run.
            count = (waiting + 1) // 2 if split and waiting >= _SPLIT_AT else waiting
            count = min(count, self._max_group)
            taken = self._waiting[:count]
            del self._waiting[:count]
            if not taken:
                self._armed = False
            return taken

    def _drain(self, conn: sqlite3.Connection) -> None:
        """The group job: commit groups until nobody waits (runs on the writer thread).

        A committed group's answers are held while the next group (the writes that waited
        meanwhile) runs its statements, and sent just before that group's ``COMMIT``: the event
        loop then runs the answered callers while the writer commits (and, with ``FULL``,
        fsyncs) without the GIL, instead of the two taking turns. Nobody is answered before
        the ``COMMIT`` that holds their writes; with nothing waiting, the answers go at once,
        and when another connection holds the file's lock they go before the next group waits
        for it (``_begin_now``).
        """
        held: list[_Answer] | None = None
        while batch := self._take(split=held is None):
            self.groups += 1
            self.writes += len(batch)
            held = self._commit_group(conn, batch, held)
        if held is not None:
            _settle(held)

    def _commit_group(self, conn: sqlite3.Connection, batch: list[_Item],
                      held: list[_Answer] | None) -> list[_Answer]:
        """Run ``batch`` in one transaction and return its answers (unsent); ``held`` (the
        previous group's, committed) is sent just before this ``COMMIT``, or on failure."""
        answers: list[_Answer] = []
        try:
            if held is not None and not _begin_now(conn):
                # Another connection holds the file's lock: the held writes are committed, so
                # their callers are answered before this group waits for it.
                _settle(held)
                held = None
                conn.execute("BEGIN IMMEDIATE")
            elif held is None:
                conn.execute("BEGIN IMMEDIATE")
            i = 0
            while i < len(batch):
                if batch[i].request is not None and self._batch is not None:
                    j = i
                    while j < len(batch) and batch[j].request is not None:
                        j += 1
                    run = batch[i:j]
                    outcomes = self._batch(conn, [item.request for item in run])
                    answers += [(item.future, *outcome)
                                for item, outcome in zip(run, outcomes, strict=True)]
                    i = j
                    continue
                item = batch[i]
                try:
                    result = item.write(conn)
                except Exception as exc:
                    if not conn.in_transaction:
                        raise  # SQLite aborted the whole transaction: the group fails
                    answers.append((item.future, True, exc))
                else:
                    answers.append((item.future, False, result))
                i += 1
            if held is not None:
                _settle(held)
                held = None
            conn.execute("COMMIT")
        except BaseException as exc:
            if held is not None:
                _settle(held)
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if self._on_failure is not None:
                self._on_failure()
            # Nothing of the group is stored: every caller gets the error, none a result.
            return [(item.future, True, exc) for item in batch]
        return answers


def _begin_now(conn: sqlite3.Connection) -> bool:
    """``BEGIN IMMEDIATE`` without waiting for the lock: False (nothing begun) when another
    connection holds it. The connection's own busy timeout is restored either way."""
    timeout = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        # The primary code: SQLITE_BUSY_RECOVERY and the like are "busy" too.
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in (sqlite3.SQLITE_BUSY,
                                                               sqlite3.SQLITE_LOCKED):
            raise
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
    return True


def _settle(answers: list[_Answer]) -> None:
    """Answer every caller of a group with one wake-up of each event loop involved."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
    for answer in answers:
        by_loop.setdefault(answer[0].get_loop(), []).append(answer)

    def settle(items: list[_Answer]) -> None:
        for future, error, value in items:
            if future.done():
                continue
            if error:
                future.set_exception(value)
            else:
                future.set_result(value)

    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, items)
