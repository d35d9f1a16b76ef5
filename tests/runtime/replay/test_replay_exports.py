"""runtime.replay and runtime.testing export exactly their sorted ``__all__``."""

from __future__ import annotations

import types

import pytest

import runtime
import runtime.replay
import runtime.testing


@pytest.mark.parametrize(
    "module",
    [pytest.param(runtime.replay, id="replay"), pytest.param(runtime.testing, id="testing")],
)
def test_exports_all_is_sorted_and_exactly_the_public_surface(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(names)


def test_exports_runtime_reexports_the_answer_apis() -> None:
    for name in ("answer_confirmation", "submit_response", "rerun_call", "pending",
                 "session_pending"):
        assert name in runtime.__all__
        assert getattr(runtime, name) is getattr(runtime.replay, name)


def test_exports_replay_is_sans_io_and_does_not_import_the_runner() -> None:
    import ast
    from pathlib import Path

    package = Path(runtime.replay.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module not in ("runtime._runner", "runtime._agent_tool"), path.name
    assert runtime.AgentTool.__module__ == "runtime._agent_tool"
    assert not hasattr(runtime.replay, "AgentTool")


def test_exports_the_child_naming_rules_evs_show_reads() -> None:
    import eventstore

    # One owner: the store's rules, re-exported (evs show runs without the runtime).
    assert runtime.replay.PARENT_LINK_KEY is eventstore.PARENT_LINK_KEY
    assert runtime.replay.child_session_id is eventstore.child_session_id
