"""The public surface of the tool layer is exactly what ``__all__`` says, sorted."""

from __future__ import annotations

import types

import pytest

import runtime
import runtime._context
import runtime._exceptions
import runtime.declarations
import runtime.tools


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(runtime, id="runtime"),
        pytest.param(runtime.tools, id="tools"),
        pytest.param(runtime.declarations, id="declarations"),
        pytest.param(runtime._context, id="context"),
        pytest.param(runtime._exceptions, id="exceptions"),
    ],
)
def test_all_is_sorted_and_resolvable(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))
    assert [name for name in names if not hasattr(module, name)] == []


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(runtime.tools, id="tools"),
        pytest.param(runtime.declarations, id="declarations"),
    ],
)
def test_all_is_exactly_the_public_surface(module: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(module.__all__)


def test_runtime_reexports_tool_layer_names() -> None:
    for name in ("FunctionTool", "ToolContext", "ToolDefinitionError", "CallOutcome"):
        assert name in runtime.__all__


def test_signals_are_not_runtime_errors() -> None:
    assert not issubclass(runtime.ConfirmationRequired, runtime.AgentRuntimeError)
    assert not issubclass(runtime.ToolValidationRefused, runtime.AgentRuntimeError)
    assert issubclass(runtime.ToolDefinitionError, runtime.RuntimeUsageError)
    assert issubclass(runtime.SchemaConversionError, runtime.ToolDefinitionError)
    assert issubclass(runtime.InvalidToolArgumentsError, runtime.ToolCallError)
