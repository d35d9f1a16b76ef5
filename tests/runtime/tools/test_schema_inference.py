"""Argument schemas inferred from signatures, docstrings and Annotated metadata."""

from __future__ import annotations

import enum
import inspect
import keyword
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from runtime import InvalidToolArgumentsError, ToolContext, ToolDefinitionError
from runtime.tools import FunctionTool, parse_docstring
from runtime.tools._schema import infer_signature


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


def test_parse_docstring_google_style() -> None:
    doc = """Find flights.

    Searches every airline.

    Args:
        origin (str): IATA code of the
            departure airport.
        when: Date, ISO format.

    Returns:
        The flights.
    """
    description, params = parse_docstring(doc)
    assert description == "Find flights.\n\nSearches every airline."
    assert params == {"origin": "IATA code of the departure airport.", "when": "Date, ISO format."}


def test_parse_docstring_without_docstring() -> None:
    assert parse_docstring(None) == ("", {})


def test_infer_signature_descriptions_priority() -> None:
    def f(
        a: Annotated[int, "from Annotated"],
        b: Annotated[int, Field(description="from Field")],
        c: int,
        d: int = Field(3, description="from default Field"),
    ) -> None:
        """Do it.

        Args:
            a: from docstring a
            b: from docstring b
            c: from docstring c
        """

    props = infer_signature(f).parameters_json_schema["properties"]
    assert props["a"]["description"] == "from Annotated"
    assert props["b"]["description"] == "from Field"
    assert props["c"]["description"] == "from docstring c"
    assert props["d"] == {"type": "integer", "default": 3, "description": "from default Field"}


def test_infer_signature_defaults_are_optional_and_context_hidden() -> None:
    def f(ctx: ToolContext, query: str, limit: int = 10, color: Color = Color.RED) -> None:
        pass

    inferred = infer_signature(f)
    schema = inferred.parameters_json_schema
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "limit", "color"}
    assert schema["additionalProperties"] is False
    assert inferred.context_parameter == "ctx"


def test_infer_signature_allows_names_that_clash_with_basemodel() -> None:
    def f(json: str, schema: int, _private: bool = False) -> None:
        pass

    inferred = infer_signature(f)
    assert set(inferred.parameters_json_schema["properties"]) == {"json", "schema", "_private"}
    assert inferred.validate("f", {"json": "x", "schema": 1}) == {
        "json": "x",
        "schema": 1,
        "_private": False,
    }


def test_infer_signature_validate_builds_models_and_reports_errors() -> None:
    def f(point: Point, mode: Literal["a", "b"] = "a") -> None:
        pass

    inferred = infer_signature(f)
    assert inferred.validate("f", {"point": {"x": 1}}) == {"point": Point(x=1, y=0), "mode": "a"}
    with pytest.raises(InvalidToolArgumentsError) as info:
        inferred.validate("f", {"point": {"x": "no"}, "mode": "c", "extra": 1})
    assert info.value.tool_name == "f"
    assert any(line.startswith("point.x:") for line in info.value.errors)
    assert any(line.startswith("mode:") for line in info.value.errors)
    assert any(line.startswith("extra:") for line in info.value.errors)


def _varargs(*items: int) -> None: ...
def _varkw(**options: int) -> None: ...
def _positional_only(a: int, /) -> None: ...
def _unannotated(a, b: int) -> None: ...  # type: ignore[no-untyped-def]
def _callable_param(callback: Callable[[int], int]) -> None: ...


@pytest.mark.parametrize(
    ("func", "parameter", "reason"),
    [
        pytest.param(_varargs, "items", "variadic", id="var-positional"),
        pytest.param(_varkw, "options", "variadic", id="var-keyword"),
        pytest.param(_positional_only, "a", "positional-only", id="positional-only"),
        pytest.param(_unannotated, "a", "no type annotation", id="missing-annotation"),
        pytest.param(_callable_param, "callback", "no JSON schema", id="unsupported-type"),
    ],
)
def test_function_tool_refuses_unusable_signatures(
    func: Callable[..., Any], parameter: str, reason: str
) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        FunctionTool(func)
    message = str(info.value)
    assert f"parameter {parameter!r}" in message
    assert func.__qualname__ in message
    assert reason in message


_SIMPLE_TYPES: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "int": (int, st.integers()),
    "str": (str, st.text()),
    "bool": (bool, st.booleans()),
    "float": (float, st.floats(allow_nan=False, allow_infinity=False)),
    "list": (list[int], st.lists(st.integers(), max_size=3)),
    "opt": (int | None, st.none() | st.integers()),
}


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
            lambda name: not keyword.iskeyword(name)
        ),
        st.sampled_from(sorted(_SIMPLE_TYPES)),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_infer_signature_round_trips_valid_arguments(
    params: dict[str, str], data: st.DataObject
) -> None:
    """For generated signatures, JSON arguments drawn per type validate back to themselves."""
    signature = inspect.Signature(
        [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=_SIMPLE_TYPES[kind][0]
            )
            for name, kind in params.items()
        ]
    )

    def func(**kwargs: Any) -> None: ...

    func.__signature__ = signature  # type: ignore[attr-defined]
    func.__annotations__ = {name: _SIMPLE_TYPES[kind][0] for name, kind in params.items()}
    inferred = infer_signature(func)
    assert sorted(inferred.parameters_json_schema["required"]) == sorted(params)
    args = {name: data.draw(_SIMPLE_TYPES[kind][1]) for name, kind in params.items()}
    assert inferred.validate("func", args) == args
