"""Run LangGraph's own graph tests with ``EventStoreSaver`` as their checkpointer.

    python scripts/run_langgraph_upstream_tests.py /path/to/langgraph [--theirs] [args…]

``/path/to/langgraph`` is a copy of langchain-ai/langgraph outside this project (it needs
``libs/langgraph/tests``; never commit it). The tests run from ``libs/langgraph`` against the
installed ``langgraph``, with ``scripts/_langgraph_upstream_plugin.py`` putting our saver (on
memory, SQLite, SQLite with encrypted values and PostgreSQL) in place of LangGraph's
checkpointer fixtures. ``--theirs`` runs the same tests on LangGraph's own in-process savers
(its ``memory``, ``sqlite`` and ``sqlite_aes``; ``NO_DOCKER=true``), to tell a failure of ours
from one of the copy's tests against the installed version. The remaining arguments go to
pytest; with none it runs ``DEFAULT_TESTS``. ``EVS_LANGGRAPH_IN_MEMORY=1`` puts our saver in
place of the ``InMemorySaver`` their tests build themselves too (see the plugin).
``NO_DOCKER=true`` is set, so LangGraph's store and cache fixtures stay in process (its
PostgreSQL and Redis ones need servers of its own). Their test suite needs packages this project
does not (``pytest-mock``, ``syrupy``, ``redis``, ``psycopg``, ``pycryptodome``,
``langgraph-checkpoint-postgres``): run this with a Python that has them as well as this
project's ``[langgraph]`` extra (``docs/langgraph.md``). Exits with pytest's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEFAULT_TESTS = ("tests/test_large_cases.py", "tests/test_large_cases_async.py")


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "libs/langgraph/tests/conftest.py").is_file():
        print(__doc__, file=sys.stderr)
        return 2
    libs = Path(argv[0]).resolve() / "libs/langgraph"
    rest = argv[1:]
    theirs = "--theirs" in rest
    if theirs:
        rest.remove("--theirs")
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    # NO_DOCKER: their store and cache fixtures stay in process (no servers of their own).
    env["NO_DOCKER"] = "true"
    plugin = [] if theirs else ["-p", "_langgraph_upstream_plugin"]
    tests = [] if any(arg.startswith("tests") for arg in rest) else list(DEFAULT_TESTS)
    command = [
        sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider",
        "--rootdir", str(libs), *tests, *rest,
    ]
    return subprocess.call(command, cwd=libs, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
