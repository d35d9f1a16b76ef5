"""Values the log cannot carry faithfully are refused with one typed error naming the path."""

from __future__ import annotations

import math
from typing import Any

import pytest

from eventstore import (
    MAX_JSON_DEPTH,
    Content,
    Event,
    EventStore,
    FunctionCall,
    InvalidEventError,
    Part,
    check_json_value,
    open_store,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(2**63 - 1, id="int64-max"),
        pytest.param(-(2**63), id="int64-min"),
        pytest.param(1.5, id="float"),
        pytest.param(_nested(MAX_JSON_DEPTH), id="depth-at-limit"),
        pytest.param({"a": [None, True, "x", {"b": 0}]}, id="mixed"),
    ],
)
def test_values_the_log_carries_pass(value: Any) -> None:
    check_json_value(value)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        pytest.param({"a": 2**63}, "['a'] is the integer 9223372036854775808", id="int64-max+1"),
        pytest.param({"a": -(2**63) - 1}, "outside the 64-bit range", id="int64-min-1"),
        pytest.param({"a": [2**64]}, "['a'][0] is the integer", id="nested-bigint"),
        pytest.param({"a": math.nan}, "['a'] is nan", id="nan"),
        pytest.param({"a": math.inf}, "['a'] is inf", id="inf"),
        pytest.param({"a": -math.inf}, "['a'] is -inf", id="-inf"),
    ],
)
def test_values_the_log_cannot_carry_are_refused_naming_the_path(value: Any, words: str) -> None:
    with pytest.raises(InvalidEventError) as raised:
        check_json_value(value, path="args")
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 970, 1000, 1023, 5000, 50_000])
def test_values_nested_too_deep_are_one_typed_error_at_every_depth(depth: int) -> None:
    with pytest.raises(InvalidEventError, match=f"deeper than {MAX_JSON_DEPTH} levels") as raised:
        check_json_value({"a": _nested(depth)}, path="args")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"n": 123456789012345678901234567890}, id="bigint"),
        pytest.param({"n": math.nan}, id="nan"),
        pytest.param({"n": _nested(1000)}, id="deep"),
    ],
)
async def test_values_append_refuses_unstorable_args_and_writes_nothing(
    tmp_path: Any, args: dict[str, Any]
) -> None:
    async with await open_store(tmp_path / "v.db", auto_upgrade=True) as store:
        await store.create_session(app_name="a", user_id="u", session_id="s")
        call = FunctionCall(id="c1", name="f", args=args)
        content = Content(role="model", parts=(Part(function_call=call),))
        event = Event(author="agent", content=content)
        with pytest.raises(InvalidEventError, match=r"function_call\.args\['n'\]"):
            await store.append("s", event, expected_version=0)
        assert await store.version("s") == 0
        assert isinstance(store, EventStore)
