"""Run the OpenAI Agents SDK's own Runner tests with ``EventStoreRunner`` in place of ``Runner``
(see ``docs/frameworks.md``)::

    .venv/bin/python scripts/run_openai_agents_runner_tests.py /work/upstream/openai-agents-python
        [--baseline] [pytest args]

The argument is a copy of the SDK's repository (its ``tests/`` folder; keep it outside this
project and never commit it). Nothing in the copy is changed: before pytest imports the SDK's
tests, this script puts ``DurableRunnerShim`` in place of ``agents.Runner`` and
``agents.run.Runner`` (the names the tests import) and ``SQLiteSessionOnOurStore`` in place of
``agents.SQLiteSession`` (as ``run_openai_agents_session_tests.py`` does). The shim sends each
``run`` / ``run_sync`` / ``run_streamed`` through ``EventStoreRunner`` on the test's
``EventStoreSession``, or, when the test gives none, on a fresh one (``memory://``) — a
``RunState`` given back goes to the session of the test's previous run, where its stop is
recorded. Calls where a durable run is not meaningful go to the SDK's ``Runner`` unchanged,
counted in the summary: a session of another kind, a server-managed conversation
(``conversation_id``, ``previous_response_id``, ``auto_previous_response_id``: the history lives
on the server), a ``RunState`` with no durable run before it (``EventStoreRunner`` takes one,
on a session: see ``docs/frameworks.md``). ``--baseline`` runs the same tests
on the SDK's ``Runner`` (the copy's tests may be older than the installed SDK: compare), and
``--baseline-session`` on the SDK's ``Runner`` given a session wherever ours would run (a test
failing there tests what the SDK does without a session, which no durable run can do).
With no test paths it runs ``DEFAULT_TESTS``.
"""

from __future__ import annotations

import argparse
import contextvars
import inspect
import os
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import agents
import agents.memory
import agents.run
import pytest
from run_openai_agents_session_tests import SQLiteSessionOnOurStore, _Watchdog

from eventstore.integrations.openai_agents import EventStoreRunner, EventStoreSession

DEFAULT_TESTS = (
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_agent_runner_sync.py",
    "tests/test_hitl_error_scenarios.py",
    "tests/test_hitl_session_scenario.py",
    "tests/test_guardrails.py",
    "tests/test_agent_as_tool.py",
    "tests/test_max_turns.py",
    "tests/test_tool_use_behavior.py",
    "tests/test_run_step_execution.py",
    "tests/test_run_step_processing.py",
)

DESELECTED: dict[str, str] = {}
"""Left out through ours (a hang, not a failure), with the reason."""

REAL_RUNNER = agents.Runner
REAL_SQLITE_SESSION = agents.SQLiteSession
ROUTES: Counter[str] = Counter()
"""How the shim sent each call: ``ours`` or why not."""
_LAST: dict[str, Any] = {}
_INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("inside_durable_run",
                                                               default=False)
"""True within a run the shim sent to ours: a nested run (an agent tool's) goes to the SDK's
``Runner``, whose default runner (``agent_tools.ChildRunRouter``) sends it to ours."""


def _route(input: Any, session: Any, options: dict[str, Any]) -> tuple[str, Any]:
    """(why not ours, or "ours"; the session ours runs on)."""
    if _INSIDE.get():
        # The SDK's Runner starts it; inside ours its default runner sends it to ours again,
        # recorded in the agent tool call's child session.
        return "a nested run (an agent tool's: ours records it in its child session)", None
    if options.get("conversation_id") or options.get("previous_response_id") or options.get(
            "auto_previous_response_id"):
        return "server-managed conversation", None
    if session is not None and not isinstance(session, EventStoreSession):
        return f"a {type(session).__name__}", None
    if session is None and isinstance(input, agents.RunState):
        session = _LAST.get("session")
        if session is None:
            # Made by the SDK's Runner without a session: ours would continue it on one, which
            # the tests of a sessionless state's ownership do not expect.
            return "a RunState with no durable run before it", None
    if session is None:
        session = EventStoreSession(f"t-{uuid.uuid4().hex}", "memory://")
    _LAST["session"] = session
    return "ours", session


class DurableRunnerShim:
    """``agents.Runner`` with ``EventStoreRunner`` behind it (see the module)."""

    @classmethod
    async def run(cls, starting_agent: Any, input: Any, *, session: Any = None,
                  **options: Any) -> Any:
        how, ours = _route(input, session, options)
        if how == "ours":
            ROUTES[how] += 1
            token = _INSIDE.set(True)
            try:
                return await EventStoreRunner.run(starting_agent, input, session=ours,
                                                  **options)
            finally:
                _INSIDE.reset(token)
        ROUTES[how] += 1
        return await REAL_RUNNER.run(starting_agent, input, session=session, **options)

    @classmethod
    def run_sync(cls, starting_agent: Any, input: Any, *, session: Any = None,
                 **options: Any) -> Any:
        how, ours = _route(input, session, options)
        ROUTES[how] += 1
        if how == "ours":
            token = _INSIDE.set(True)
            try:
                return EventStoreRunner.run_sync(starting_agent, input, session=ours,
                                                 **options)
            finally:
                _INSIDE.reset(token)
        return REAL_RUNNER.run_sync(starting_agent, input, session=session, **options)

    @classmethod
    def run_streamed(cls, starting_agent: Any, input: Any, *args: Any, session: Any = None,
                     **options: Any) -> Any:
        options = _streamed_options(starting_agent, input, args, session, options)
        how, ours = _route(input, session, options)
        ROUTES[how] += 1
        if how == "ours":
            token = _INSIDE.set(True)  # the run's task starts in this context
            try:
                return EventStoreRunner.run_streamed(starting_agent, input, session=ours,
                                                     **options)
            finally:
                _INSIDE.reset(token)
        return REAL_RUNNER.run_streamed(starting_agent, input, session=session, **options)


def _streamed_options(starting_agent: Any, input: Any, args: tuple[Any, ...], session: Any,
                      options: dict[str, Any]) -> dict[str, Any]:
    """``run_streamed``'s options by name: the SDK's takes them positionally too."""
    named = inspect.signature(REAL_RUNNER.run_streamed).bind(
        starting_agent, input, *args, session=session, **options).arguments
    return {k: v for k, v in named.items() if k not in ("starting_agent", "input", "session")}


class SessionRunnerShim:
    """``agents.Runner`` as the SDK's own, given the session ours would run on
    (``--baseline-session``): what the SDK's ``Runner`` does for the calls ours takes, when
    it too has a session (``EventStoreRunner`` always has one). The session is the SDK's
    ``SQLiteSession`` in memory; a ``RunState`` goes to the previous run's."""

    @staticmethod
    def _session(input: Any, session: Any, options: dict[str, Any]) -> Any:
        if session is not None or _INSIDE.get() or options.get("conversation_id") or \
                options.get("previous_response_id") or options.get("auto_previous_response_id"):
            return session
        if isinstance(input, agents.RunState):
            return _LAST.get("session")
        _LAST["session"] = REAL_SQLITE_SESSION(f"t-{uuid.uuid4().hex}")
        return _LAST["session"]

    @classmethod
    async def run(cls, starting_agent: Any, input: Any, *, session: Any = None,
                  **options: Any) -> Any:
        session = cls._session(input, session, options)
        token = _INSIDE.set(True)
        try:
            return await REAL_RUNNER.run(starting_agent, input, session=session, **options)
        finally:
            _INSIDE.reset(token)

    @classmethod
    def run_sync(cls, starting_agent: Any, input: Any, *, session: Any = None,
                 **options: Any) -> Any:
        return REAL_RUNNER.run_sync(starting_agent, input, session=cls._session(
            input, session, options), **options)

    @classmethod
    def run_streamed(cls, starting_agent: Any, input: Any, *args: Any, session: Any = None,
                     **options: Any) -> Any:
        options = _streamed_options(starting_agent, input, args, session, options)
        return REAL_RUNNER.run_streamed(starting_agent, input, session=cls._session(
            input, session, options), **options)


class _Summary:
    @pytest.hookimpl
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        _LAST.clear()

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(f"runner calls by route: {dict(ROUTES)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="a copy of openai/openai-agents-python")
    parser.add_argument("--per-test", type=float, default=120.0, metavar="SECONDS")
    parser.add_argument("--baseline", action="store_true",
                        help="the SDK's own Runner and SQLiteSession (nothing replaced)")
    parser.add_argument("--baseline-session", action="store_true",
                        help="the SDK's own Runner, given a session where ours would run")
    args, pytest_args = parser.parse_known_args()
    root = args.upstream.resolve()
    if not (root / "tests").is_dir():
        parser.error(f"{root} has no tests folder: not a copy of openai-agents-python")
    if args.baseline_session:
        agents.Runner = SessionRunnerShim  # type: ignore[misc, assignment]
        agents.run.Runner = SessionRunnerShim  # type: ignore[misc, assignment]
    elif not args.baseline:
        agents.SQLiteSession = SQLiteSessionOnOurStore  # type: ignore[misc, assignment]
        agents.memory.SQLiteSession = SQLiteSessionOnOurStore  # type: ignore[misc, assignment]
        agents.Runner = DurableRunnerShim  # type: ignore[misc, assignment]
        agents.run.Runner = DurableRunnerShim  # type: ignore[misc, assignment]
    os.chdir(root)
    sys.path.insert(0, str(root))
    named = any(not a.startswith("-") and (root / a.split("::")[0]).exists()
                for a in pytest_args)
    deselect = [] if args.baseline or args.baseline_session else [
        f"--deselect={node}" for node in DESELECTED]
    return int(pytest.main([
        f"--rootdir={root}", "-p", "no:cacheprovider", "-q", *deselect,
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=session",
        *pytest_args, *([] if named else DEFAULT_TESTS),
    ], plugins=[_Watchdog(args.per_test), _Summary()]))


if __name__ == "__main__":
    sys.exit(main())
