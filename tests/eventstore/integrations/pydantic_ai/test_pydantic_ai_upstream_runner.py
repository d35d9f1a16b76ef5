"""``scripts/run_pydantic_ai_upstream_tests.py`` classifies an upstream failure as the engine's
only by test id and by what the failure says: the same listed test failing for another reason,
or an unlisted test, is not classified (so the runner exits 1 on it)."""

from __future__ import annotations

import sys
from pathlib import Path

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "scripts"))

from _pai_upstream_known import KNOWN, known_failure  # noqa: E402
from run_pydantic_ai_upstream_tests import _parse, _why  # noqa: E402

_OUTPUT = """\
=================================== FAILURES ===================================
___________________________ test_run_stream_in_flow ____________________________
[gw0] linux -- Python 3.11.7
E       Failed: DID NOT RAISE Exception
____________________ test_prefect_agent_with_hitl_tool _____________________
E       assert False
=========================== short test summary info ============================
PASSED tests/test_prefect.py::test_simple_agent_run_in_flow
FAILED tests/test_prefect.py::test_run_stream_in_flow - Failed: DID NOT RAISE Exception
FAILED tests/test_prefect.py::test_prefect_agent_with_hitl_tool - assert False
"""


def test_upstream_failures_are_classified_by_id_and_by_what_they_say() -> None:
    found = _parse(_OUTPUT)
    assert found["tests/test_prefect.py::test_simple_agent_run_in_flow"][0] == "PASSED"
    outcome, message = found["tests/test_prefect.py::test_run_stream_in_flow"]
    assert outcome == "FAILED"
    assert "DID NOT RAISE" in message
    assert _why("tests/test_prefect.py::test_run_stream_in_flow", message) is not None
    # Listed, but failing for another reason: not the engine's.
    assert _why("tests/test_prefect.py::test_run_stream_in_flow", "KeyError: 'x'") is None
    # Not listed (a difference of ours, fixed since): never the engine's.
    hitl = "tests/test_prefect.py::test_prefect_agent_with_hitl_tool"
    assert _why(hitl, found[hitl][1]) is None


def test_every_listed_test_names_a_reason_and_a_pattern() -> None:
    for file, tests in KNOWN.items():
        for test, (_pattern, why) in tests.items():
            assert len(why) > 20
            # No catch-all: an entry needs its failure to say something.
            assert known_failure(f"tests/{file}::{test}", "") is None
