"""FunctionTool from callables, the @function_tool decorator and toolset classes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from runtime import (
    InvalidToolArgumentsError,
    ReadonlyContext,
    ToolContext,
    ToolDefinitionError,
    ToolResultError,
)
from runtime.declarations import Schema, SchemaType, to_openai
from runtime.tools import (
    ConfirmationGate,
    FunctionTool,
    FunctionToolLike,
    ResponseDeferrer,
    Tool,
    ToolsetClass,
    function_tool,
    is_idempotent,
    requires_confirmation,
    tool_method,
)


def _ctx(call_id: str = "call-1") -> ToolContext:
    return ToolContext(
        function_call_id=call_id, invocation_id="inv", agent_name="agent", session_id="s1"
    )


class Forecast(BaseModel):
    city: str
    celsius: float


async def test_function_tool_runs_sync_function_in_a_thread() -> None:
    seen: list[str] = []

    def where(city: str) -> str:
        """Return the thread name."""
        seen.append(threading.current_thread().name)
        return city.upper()

    tool = FunctionTool(where)
    assert await tool.run(_ctx(), {"city": "oslo"}) == {"result": "OSLO"}
    assert seen
    assert seen[0] != threading.main_thread().name


async def test_function_tool_runs_async_function_and_injects_context() -> None:
    async def remember(ctx: ToolContext, key: str, value: int) -> dict[str, Any]:
        ctx.state[key] = value
        return {"stored": key, "call": ctx.function_call_id}

    tool = FunctionTool(remember)
    ctx = _ctx("c7")
    assert await tool.run(ctx, {"key": "k", "value": 3}) == {"stored": "k", "call": "c7"}
    assert ctx.actions.state_delta == {"k": 3}
    assert "ctx" not in tool.declaration().parameters.properties


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        pytest.param({"a": 1}, {"a": 1}, id="mapping"),
        pytest.param(Forecast(city="x", celsius=1.5), {"city": "x", "celsius": 1.5}, id="model"),
        pytest.param([1, 2], {"result": [1, 2]}, id="list"),
        pytest.param("text", {"result": "text"}, id="scalar"),
        pytest.param(None, {"result": None}, id="none"),
    ],
)
async def test_function_tool_converts_results(returned: Any, expected: dict[str, Any]) -> None:
    def produce() -> Any:
        return returned

    assert await FunctionTool(produce).run(_ctx(), {}) == expected


async def test_function_tool_validates_result_against_return_annotation() -> None:
    def forecast(city: str) -> Forecast:
        return {"city": city, "celsius": "2.5"}  # type: ignore[return-value]

    def broken() -> int:
        return "many"  # type: ignore[return-value]

    assert await FunctionTool(forecast).run(_ctx(), {"city": "Rome"}) == {
        "city": "Rome",
        "celsius": 2.5,
    }
    with pytest.raises(ToolResultError, match="return annotation"):
        await FunctionTool(broken).run(_ctx(), {})


async def test_function_tool_refuses_non_json_result() -> None:
    def odd() -> Any:
        return {"lock": threading.Lock()}

    with pytest.raises(ToolResultError, match="cannot be converted to JSON"):
        await FunctionTool(odd).run(_ctx(), {})


def test_function_tool_declares_response_schema_from_return_annotation() -> None:
    def forecast(city: str) -> Forecast:
        raise NotImplementedError

    def count() -> int:
        raise NotImplementedError

    response = FunctionTool(forecast).declaration().response
    assert response is not None
    assert set(response.properties) == {"city", "celsius"}
    wrapped = FunctionTool(count).declaration().response
    assert wrapped == Schema(
        type=SchemaType.OBJECT,
        properties={"result": Schema(type=SchemaType.INTEGER)},
        required=("result",),
    )


async def test_function_tool_invalid_arguments_raise() -> None:
    def add(a: int, b: int = 0) -> int:
        return a + b

    tool = FunctionTool(add)
    with pytest.raises(InvalidToolArgumentsError, match=r"'add'.*a: Field required"):
        await tool.run(_ctx(), {"b": 1})


def test_function_tool_decorator_with_and_without_options() -> None:
    @function_tool
    def plain(q: str) -> str:
        """Search."""
        return q

    @function_tool(name="lookup", description="Look it up.", idempotent=True)
    def configured(q: Annotated[str, "The query"]) -> str:
        return q

    assert isinstance(plain, FunctionTool)
    assert (plain.name, plain.description) == ("plain", "Search.")
    assert (configured.name, configured.description) == ("lookup", "Look it up.")
    assert configured.idempotent
    assert is_idempotent(configured)
    assert not is_idempotent(plain)
    assert to_openai(configured.declaration())["function"]["parameters"]["properties"] == {
        "q": {"type": "string", "description": "The query"}
    }


def test_function_tool_satisfies_capability_protocols() -> None:
    tool = FunctionTool(lambda: None, name="noop")
    assert isinstance(tool, Tool)
    assert isinstance(tool, FunctionToolLike)
    assert isinstance(tool, ConfirmationGate)
    assert isinstance(tool, ResponseDeferrer)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("has space", id="space"),
        pytest.param("9x", id="digit"),
    ],
)
def test_function_tool_refuses_invalid_names(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="is not valid"):
        FunctionTool(lambda: None, name=name)


def test_function_tool_refuses_lambda_without_name() -> None:
    with pytest.raises(ToolDefinitionError, match="'<lambda>'"):
        FunctionTool(lambda: None)


def test_function_tool_refuses_generators() -> None:
    async def stream() -> Any:
        yield "x"

    with pytest.raises(ToolDefinitionError, match="generator"):
        FunctionTool(stream)


def test_function_tool_requires_confirmation_flag_and_predicate() -> None:
    def transfer(amount: int) -> None: ...

    def needs_human(args: Mapping[str, Any]) -> bool:
        return bool(args["amount"] > 100)

    always = FunctionTool(transfer, requires_confirmation=True)
    big_only = FunctionTool(transfer, requires_confirmation=needs_human)
    assert requires_confirmation(always, {"amount": 1})
    assert not requires_confirmation(big_only, {"amount": "5"})
    assert requires_confirmation(big_only, {"amount": "500"})
    with pytest.raises(InvalidToolArgumentsError):
        big_only.requires_confirmation_for({"amount": "lots"})


async def test_function_tool_long_running_none_defers_response() -> None:
    def start_job(job: str) -> None:
        return None

    tool = FunctionTool(start_job, is_long_running=True)
    assert tool.is_long_running
    assert tool.defers_response()
    assert await tool.run(_ctx(), {"job": "x"}) is None


async def test_function_tool_schema_override_changes_declaration_only() -> None:
    def search(q: str, limit: int = 5) -> list[str]:
        return [q] * limit

    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "Words"}},
        "required": ["q"],
    }
    tool = FunctionTool(search, schema=schema)
    assert tool.declaration().parameters.properties["q"].description == "Words"
    assert "limit" not in tool.declaration().parameters.properties
    assert await tool.run(_ctx(), {"q": "a", "limit": 2}) == {"result": ["a", "a"]}
    with pytest.raises(InvalidToolArgumentsError, match="q: Field required"):
        await tool.run(_ctx(), {})


async def test_function_tool_callable_object_with_async_call() -> None:
    @dataclass
    class Greeter:
        greeting: str

        async def __call__(self, name: str) -> str:
            await asyncio.sleep(0)
            return f"{self.greeting}, {name}"

    tool = FunctionTool(Greeter("Hi"), name="greet")
    assert await tool.run(_ctx(), {"name": "Ada"}) == {"result": "Hi, Ada"}


class Calculator(ToolsetClass):
    def __init__(self, offset: int) -> None:
        self.offset = offset

    @tool_method
    def add(self, a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: First.
            b: Second.
        """
        return a + b + self.offset

    @tool_method(name="negate", idempotent=True)
    async def neg(self, a: int) -> int:
        return -a

    def helper(self) -> None:
        """Not a tool."""


async def test_toolset_class_binds_marked_methods() -> None:
    toolset = Calculator(offset=10)
    tools = await toolset.tools(ReadonlyContext(invocation_id="i", agent_name="a", session_id="s"))
    assert [t.name for t in tools] == ["add", "negate"]
    add, neg = tools
    assert isinstance(add, FunctionTool)
    assert isinstance(neg, FunctionTool)
    assert add.description == "Add two numbers."
    assert add.declaration().parameters.properties["a"].description == "First."
    assert await add.run(_ctx(), {"a": 1, "b": 2}) == {"result": 13}
    assert await neg.run(_ctx(), {"a": 4}) == {"result": -4}
    assert neg.idempotent


async def test_toolset_class_subclass_override_without_decorator_removes_tool() -> None:
    class NoAdd(Calculator):
        def add(self, a: int, b: int) -> int:
            return 0

    tools = await NoAdd(0).tools(ReadonlyContext(invocation_id="i", agent_name="a", session_id="s"))
    assert [t.name for t in tools] == ["negate"]


def test_toolset_class_refuses_bad_method_at_definition() -> None:
    with pytest.raises(ToolDefinitionError, match=r"parameter 'rest' of .*Bad\.run"):

        class Bad(ToolsetClass):
            @tool_method
            def run(self, *rest: int) -> None: ...


def test_tool_options_are_exactly_function_tools_keyword_arguments() -> None:
    import inspect

    from runtime.tools import ToolOptions

    keywords = [
        p.name
        for p in inspect.signature(FunctionTool.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert keywords == list(ToolOptions.__annotations__)


async def test_tool_method_passes_every_option_and_refuses_unknown_ones() -> None:
    class Payments(ToolsetClass):
        @tool_method(
            name="pay",
            description="Pay.",
            schema={"type": "object", "properties": {"cents": {"type": "integer"}}},
            requires_confirmation=lambda args: args["cents"] > 100,
            idempotent=True,
            is_long_running=True,
        )
        def charge(self, cents: int) -> None: ...

    (pay,) = await Payments().tools(
        ReadonlyContext(invocation_id="i", agent_name="a", session_id="s")
    )
    assert isinstance(pay, FunctionTool)
    assert (pay.name, pay.description, pay.idempotent, pay.is_long_running) == (
        "pay",
        "Pay.",
        True,
        True,
    )
    assert pay.requires_confirmation_for({"cents": 101})
    assert not pay.requires_confirmation_for({"cents": 5})
    with pytest.raises(TypeError, match="idempotant"):
        tool_method(idempotant=True)  # type: ignore[call-overload]


def test_streaming_and_function_tools_share_naming_and_declaration() -> None:
    from runtime import StreamingFunctionTool
    from runtime.tools._function import CallableTool

    async def shout(text: Annotated[str, "What to shout"]) -> AsyncIterator[str]:
        """Shout it."""
        yield text.upper()

    def echo(text: str) -> str:
        return text

    streaming = StreamingFunctionTool(shout)
    assert isinstance(streaming, CallableTool)
    assert isinstance(function_tool(echo), CallableTool)
    assert (streaming.name, streaming.description) == ("shout", "Shout it.")
    assert to_openai(streaming.declaration())["function"]["parameters"]["properties"] == {
        "text": {"type": "string", "description": "What to shout"}
    }
    with pytest.raises(ToolDefinitionError, match="is not valid"):
        StreamingFunctionTool(shout, name="no spaces")
