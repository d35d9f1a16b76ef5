"""Run the OpenAI Agents SDK's own session tests with ``EventStoreSession`` in place of
``SQLiteSession`` (see ``docs/frameworks.md``)::

    .venv/bin/python scripts/run_openai_agents_session_tests.py /work/upstream/openai-agents-python

The argument is a copy of the SDK's repository (it needs only its ``tests/`` folder; keep it
outside this project and never commit it). Nothing in that copy is changed: before pytest
imports the SDK's tests, this script replaces ``agents.SQLiteSession`` (the name those tests
import) with ``SQLiteSessionOnOurStore``, our session behind ``SQLiteSession``'s constructor:
``SQLiteSession(id)`` (an in-memory database) becomes ``EventStoreSession(id)`` on a private
``memory://`` store, ``SQLiteSession(id, path)`` an ``EventStoreSession`` on an event-store
SQLite file at ``path``. Extra arguments go to pytest (e.g. ``-k limit``, ``-x``); with none it
runs ``tests/memory/test_session*.py`` and the two compaction-session tests that wrap a
``SQLiteSession`` (``DEFAULT_TESTS``).

Left out (``DESELECTED``, each with its reason): the tests that read or change
``SQLiteSession``'s private tables, locks and connections, or match its own error text —
they test SQLite's table layout, not the session protocol. Each test is given ``--per-test``
seconds (60 by default): a test still running then fails the whole run (exit status 3) with
every thread's stack printed, so a hang is a failure, never a stall.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agents
import agents.memory
import pytest

from eventstore.integrations.openai_agents import EventStoreSession

DEFAULT_TESTS = (
    "tests/memory/test_session.py",
    "tests/memory/test_session_context_wrapper.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_session_persistence_sanitize.py",
    # The SDK's compaction-session tests whose underlying session is a SQLiteSession (ours
    # here): its OpenAIResponsesCompactionSession wrapping our session, restoring history
    # after a cancelled compaction. The file's other tests use mocks or SimpleListSession.
    *(f"tests/memory/test_openai_responses_compaction_session.py::"
      f"TestOpenAIResponsesCompactionSession::{name}" for name in (
          "test_cancel_restore_waits_for_mutation_lock_before_newer_writes",
          "test_exception_restore_drains_when_compaction_is_cancelled")),
)

_PRIVATE = "reads or changes SQLiteSession's private tables, connections or locks"
DESELECTED: dict[str, str] = {
    "test_session.py::test_sqlite_session_close_closes_worker_thread_connections": _PRIVATE,
    "test_session.py::test_sqlite_session_closed_rejects_empty_add_items":
        "matches SQLiteSession's own message ('SQLiteSession is closed')",
    "test_session.py::test_sqlite_session_pop_item_skips_corrupt_most_recent": _PRIVATE,
    "test_session.py::test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows":
        _PRIVATE,
    "test_session.py::test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _PRIVATE,
    "test_session.py::test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows":
        _PRIVATE,
    "test_session.py::test_sqlite_session_file_lock_is_shared_across_instances": _PRIVATE,
    "test_session.py::test_sqlite_session_failed_add_items_releases_write_lock": _PRIVATE,
    "test_session.py::test_sqlite_session_failed_clear_session_rolls_back": _PRIVATE,
    "test_session.py::test_sqlite_session_failed_pop_item_releases_write_lock": _PRIVATE,
    "test_session.py::test_sqlite_session_rollback_failure_evicts_connection": _PRIVATE,
    "test_session.py::test_sqlite_session_close_retries_quarantined_connection": _PRIVATE,
    "test_session.py::test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome":
        _PRIVATE,
}


_TAKES_VALUE = frozenset({"--deselect", "--ignore", "--ignore-glob", "-k", "-m", "-p", "-o"})


class SQLiteSessionOnOurStore(EventStoreSession):
    """``EventStoreSession`` behind ``SQLiteSession``'s constructor (the table names are
    SQLiteSession's own and mean nothing here)."""

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        url = "memory://" if str(db_path) == ":memory:" else db_path
        super().__init__(session_id, url, session_settings)
        self.db_path = db_path


class _Watchdog:
    """Fails the run when one test outlives ``seconds`` (a hang), printing every stack."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._err = os.fdopen(os.dup(2), "w")  # pytest captures fd 2 while a test runs

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        def expired() -> None:
            print(f"\n\n{item.nodeid} still runs after {self.seconds:g} s: a hang.",
                  file=self._err, flush=True)
            faulthandler.dump_traceback(file=self._err, all_threads=True)
            os._exit(3)

        timer = threading.Timer(self.seconds, expired)
        timer.daemon = True
        timer.start()
        try:
            return (yield)
        finally:
            timer.cancel()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="a copy of openai/openai-agents-python")
    parser.add_argument("--per-test", type=float, default=60.0, metavar="SECONDS",
                        help="fail the run when one test runs longer (default 60)")
    parser.add_argument("--all", action="store_true",
                        help="run the deselected tests too (they fail: see DESELECTED)")
    args, pytest_args = parser.parse_known_args()
    root = args.upstream.resolve()
    if not (root / "tests" / "memory").is_dir():
        parser.error(f"{root} has no tests/memory folder: not a copy of openai-agents-python")

    agents.SQLiteSession = SQLiteSessionOnOurStore  # type: ignore[misc, assignment]
    agents.memory.SQLiteSession = SQLiteSessionOnOurStore  # type: ignore[misc, assignment]
    os.chdir(root)
    sys.path.insert(0, str(root))  # the SDK's tests import each other as ``tests.…``

    named = any(
        not arg.startswith("-") and (root / arg.split("::")[0]).exists()
        and (i == 0 or pytest_args[i - 1] not in _TAKES_VALUE)
        for i, arg in enumerate(pytest_args)
    )
    deselect = [] if args.all else [
        f"--deselect=tests/memory/{node}" for node in DESELECTED
    ]
    return int(pytest.main([
        f"--rootdir={root}", "-p", "no:cacheprovider",
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=session",
        *deselect, *pytest_args, *([] if named else DEFAULT_TESTS),
    ], plugins=[_Watchdog(args.per_test)]))


if __name__ == "__main__":
    sys.exit(main())
