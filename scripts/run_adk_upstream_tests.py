"""Run google-adk's own session contract tests on our ``EventStoreSessionService``.

    .venv/bin/python scripts/run_adk_upstream_tests.py /path/to/adk-python [--artifacts] [args…]

``/path/to/adk-python`` is a checkout of google/adk-python outside this project, at the
version of the installed google-adk (its ``tests/unittests/sessions/_conformance.py`` holds
the backend registry). Every test of ``tests/unittests/sessions/test_session_service.py``
that takes the shared ``session_service`` fixture runs on memory, SQLite and PostgreSQL
(``scripts/_adk_upstream_plugin.py``); ADK's tests of its own services are deselected. With
``--artifacts``, the in-memory cases of ``tests/unittests/artifacts/test_artifact_service.py``
run on ``EventStoreArtifactService`` instead (that module imports google-cloud-storage). Exits
with pytest's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tests/unittests/sessions").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    checkout = Path(argv[0]).resolve()
    rest = argv[1:]
    artifacts = "--artifacts" in rest
    if artifacts:
        rest.remove("--artifacts")
        tests = ["tests/unittests/artifacts/test_artifact_service.py",
                 "-k", "(IN_MEMORY or in_memory) and evs_"]
    else:
        tests = ["tests/unittests/sessions/test_session_service.py",
                 "-k", "evs_memory or evs_sqlite or evs_postgres"]
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    if artifacts:
        env["EVS_ADK_ARTIFACTS"] = "1"
    command = [
        sys.executable, "-m", "pytest", "-p", "_adk_upstream_plugin", "-p", "no:cacheprovider",
        "--rootdir", str(checkout), "-o", "asyncio_mode=auto",
        "-o", "asyncio_default_fixture_loop_scope=function",
        *tests, *rest,
    ]
    return subprocess.call(command, cwd=checkout, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
