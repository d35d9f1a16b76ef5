"""Run google-adk's own session contract tests on our ``EventStoreSessionService``.

    .venv/bin/python scripts/run_adk_upstream_tests.py /path/to/adk-python \
        [--artifacts | --backend-specific | --resume] [args…]

``/path/to/adk-python`` is a checkout of google/adk-python outside this project, at the
version of the installed google-adk (its ``tests/unittests/sessions/_conformance.py`` holds
the backend registry). Every test of ``tests/unittests/sessions/test_session_service.py``
that takes the shared ``session_service`` fixture runs on memory, SQLite and PostgreSQL
(``scripts/_adk_upstream_plugin.py``); ADK's tests of its own services are deselected. With
``--artifacts``, the in-memory cases of ``tests/unittests/artifacts/test_artifact_service.py``
run on ``EventStoreArtifactService`` instead (that module imports google-cloud-storage).
With ``--backend-specific``, the tests of that module written for ADK's own services
(``BACKEND_SPECIFIC`` in the plugin: stale writers, a deleted session, ties, padded ids, …)
run on ours instead, their service classes swapped, once per backend.

With ``--resume``, ADK's tests of resumable invocations (``RESUME_TESTS``: pause, resume and
tool confirmation in the runner, the resumable LLM, loop, parallel and sequential agents,
agent transfer, the App) run first on ADK's own in-memory service, then once per backend of
``EVS_ADK_BACKENDS`` with every session service those tests build replaced by ours
(``EVS_ADK_RESUME``, see the plugin); it prints, per backend, how many tests passed on ADK's
service, how many of them ran on ours, and how many of those passed on ours, naming any that
passed on ADK's and not on ours (the exit status is 1 then). Other exits: pytest's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

RESUME_TESTS = (
    "tests/unittests/runners/test_pause_invocation.py",
    "tests/unittests/runners/test_resume_invocation.py",
    "tests/unittests/runners/test_run_tool_confirmation.py",
    "tests/unittests/agents/test_resumable_llm_agent.py",
    "tests/unittests/agents/test_loop_agent.py",
    "tests/unittests/agents/test_parallel_agent.py",
    "tests/unittests/agents/test_sequential_agent.py",
    "tests/unittests/flows/llm_flows/test_agent_transfer.py",
    "tests/unittests/apps/test_apps.py",
    # 2.x moved agent transfer into the workflow package and added resumable workflows
    "tests/unittests/workflow/test_agent_transfer.py",
    "tests/unittests/workflow/test_workflow_hitl.py",
    "tests/unittests/workflow/test_workflow_parallel_worker.py",
    "tests/unittests/workflow/test_node_tool.py",
    "tests/unittests/workflow/test_llm_agent_as_node.py",
    "tests/unittests/workflow/test_dynamic_use_as_output.py",
    "tests/unittests/workflow/test_function_node.py",
)
"""ADK's test modules that run resumable invocations (``grep -l is_resumable``, less those
that test the context objects alone); a module the checkout does not have is skipped."""


def _passed(checkout: Path, env: dict[str, str], rest: list[str]) -> set[str]:
    command = [
        sys.executable, "-m", "pytest", "-p", "_adk_upstream_plugin", "-p", "no:cacheprovider",
        "--rootdir", str(checkout), "-o", "asyncio_mode=auto", "-q", "-rA",
        "--continue-on-collection-errors",
        *[t for t in RESUME_TESTS if (checkout / t).is_file()], *rest,
    ]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True,
                          check=False)
    return {line.split(" ", 1)[1].split(" - ")[0] for line in done.stdout.splitlines()
            if line.startswith("PASSED ")}


def _resume(checkout: Path, env: dict[str, str], rest: list[str]) -> int:
    baseline = _passed(checkout, env, rest)
    missed = False
    for kind in os.environ.get("EVS_ADK_BACKENDS", "memory,sqlite,postgres").split(","):
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / "ran-on-ours"
            ours = _passed(checkout, dict(env, EVS_ADK_RESUME=kind,
                                          EVS_ADK_RESUME_LOG=str(log)), rest)
            ran = set(log.read_text().split()) if log.exists() else set()
        lost = sorted((baseline & ran) - ours)
        print(f"{kind}: {len(baseline)} passed on ADK's in-memory service; {len(ran)} ran on "
              f"ours, {len(ran & ours)} of them passed ({len(baseline & ran & ours)} of the "
              f"{len(baseline & ran)} that pass on ADK's)")
        for nodeid in lost:
            print(f"    passes on ADK's service, not on ours: {nodeid}")
        missed = missed or bool(lost)
    return 1 if missed else 0


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tests/unittests/sessions").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    checkout = Path(argv[0]).resolve()
    rest = argv[1:]
    artifacts = "--artifacts" in rest
    specific = "--backend-specific" in rest
    if artifacts:
        rest.remove("--artifacts")
        tests = ["tests/unittests/artifacts/test_artifact_service.py",
                 "-k", "(IN_MEMORY or in_memory) and evs_"]
    elif specific:
        rest.remove("--backend-specific")
        tests = ["tests/unittests/sessions/test_session_service.py"]
    else:
        tests = ["tests/unittests/sessions/test_session_service.py",
                 "-k", "evs_memory or evs_sqlite or evs_postgres"]
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    if artifacts:
        env["EVS_ADK_ARTIFACTS"] = "1"
    if specific:
        env["EVS_ADK_BACKEND_SPECIFIC"] = "1"
    if "--resume" in rest:
        rest.remove("--resume")
        return _resume(checkout, env, rest)
    command = [
        sys.executable, "-m", "pytest", "-p", "_adk_upstream_plugin", "-p", "no:cacheprovider",
        "--rootdir", str(checkout), "-o", "asyncio_mode=auto",
        "-o", "asyncio_default_fixture_loop_scope=function",
        *tests, *rest,
    ]
    return subprocess.call(command, cwd=checkout, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
