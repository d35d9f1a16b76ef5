"""Function tools: plain Python callables (sync or async) and methods of a toolset class as tools.

The schema is inferred once, at definition time; definition problems raise ``ToolDefinitionError``
immediately rather than at the first model call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar, Unpack, overload

import pydantic
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from runtime._context import ReadonlyContext, ToolContext
from runtime._exceptions import InvalidToolArgumentsError, ToolDefinitionError, ToolResultError
from runtime.declarations import FunctionDeclaration, Schema, declaration_from_json_schema
from runtime.declarations import schema_to_json_schema as _ir_to_json_schema
from runtime.tools._base import Tool
from runtime.tools._schema import InferredSignature, infer_signature, return_json_schema

__all__ = [
    "CallableTool",
    "ConfirmationPredicate",
    "FunctionTool",
    "ToolOptions",
    "ToolsetClass",
    "function_tool",
    "tool_method",
]

ConfirmationPredicate = Callable[[Mapping[str, Any]], bool]
"""Decides from the validated arguments whether a call needs a human confirmation."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_F = TypeVar("_F", bound=Callable[..., Any])


class CallableTool:
    """The part every tool backed by a Python callable shares (function and streaming tools).

    Guarantees: the name is valid (1-64 letters, digits, ``_`` or ``-``), the signature is inferred
    once, at definition time (``ToolDefinitionError`` otherwise), and ``validate_args`` and the
    declaration come from that same signature.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        is_long_running: bool,
        check: Callable[[Callable[..., Any], str, str], None] | None = None,
    ) -> None:
        qualname = getattr(func, "__qualname__", repr(func))
        tool_name = name if name is not None else getattr(func, "__name__", "")
        if not _NAME.match(tool_name):
            raise ToolDefinitionError(
                f"Tool name {tool_name!r} (from {qualname}) is not valid: use 1-64 letters, "
                f"digits, '_' or '-', starting with a letter or '_'; pass name=... to choose one.",
                tool_name=tool_name,
            )
        if check is not None:
            check(func, tool_name, qualname)
        self.func = func
        """The wrapped callable."""
        self._qualname = qualname
        self._name = tool_name
        self._signature: InferredSignature = infer_signature(func, tool_name=tool_name)
        self._description = description if description is not None else self._signature.description
        self._is_long_running = is_long_running
        self._declaration = self._declare(self._signature.parameters_json_schema)

    def _declare(
        self, parameters: Mapping[str, Any], response: Mapping[str, Any] | None = None
    ) -> FunctionDeclaration:
        return declaration_from_json_schema(
            self._name, description=self._description, parameters=parameters, response=response
        )

    @property
    def name(self) -> str:
        """The tool name the model calls."""
        return self._name

    @property
    def description(self) -> str:
        """The description the model reads (argument or docstring)."""
        return self._description

    @property
    def is_long_running(self) -> bool:
        """Marks the model event's ``long_running_tool_ids``; the response may arrive later."""
        return self._is_long_running

    def declaration(self) -> FunctionDeclaration:
        """Return the declaration (built once, at definition time)."""
        return self._declaration

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return the validated keyword arguments; raise ``InvalidToolArgumentsError`` otherwise."""
        return self._signature.validate(self._name, args)

    def _call_kwargs(self, ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        """The validated arguments plus the injected context parameter, if the function has one."""
        kwargs = self.validate_args(args)
        if self._signature.context_parameter is not None:
            kwargs[self._signature.context_parameter] = ctx
        return kwargs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, func={self._signature.function_name})"


def _refuse_generators(func: Callable[..., Any], tool_name: str, qualname: str) -> None:
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        raise ToolDefinitionError(
            f"{qualname} is a generator; a function tool must return its result. "
            f"Implement StreamingTool for streamed output.",
            tool_name=tool_name,
        )


class ToolOptions(TypedDict, total=False):
    """The options of ``function_tool`` and ``tool_method``: ``FunctionTool``'s keyword arguments.

    Defaults are ``FunctionTool``'s; this is the one list both decorators take.
    """

    name: str | None
    """The tool name (default: the function's name)."""
    description: str | None
    """What the model reads (default: the docstring)."""
    schema: Mapping[str, Any] | Schema | None
    """An explicit parameters schema instead of the inferred one."""
    requires_confirmation: bool | ConfirmationPredicate
    """A human must confirm each call (or the calls the predicate picks)."""
    idempotent: bool
    """A re-run after a crash is safe."""
    is_long_running: bool
    """The response may arrive later; a ``None`` result then produces no response."""


class FunctionTool(CallableTool):
    """A tool backed by a Python callable.

    Guarantees: the declaration and validation come from the same signature (or the explicit
    ``schema``); ``run`` validates the model's arguments, injects the ``ToolContext`` parameter,
    runs sync callables in a worker thread, and returns a JSON mapping — a mapping result as is,
    a pydantic model dumped, anything else as ``{"result": value}``.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        schema: Mapping[str, Any] | Schema | None = None,
        requires_confirmation: bool | ConfirmationPredicate = False,
        idempotent: bool = False,
        is_long_running: bool = False,
    ) -> None:
        super().__init__(
            func,
            name=name,
            description=description,
            is_long_running=is_long_running,
            check=_refuse_generators,
        )
        self._requires_confirmation = requires_confirmation
        self.idempotent = idempotent
        """A re-run after a crash is safe (the call may run twice with the same idempotency key)."""
        self._is_async = _is_async_callable(func)
        self._return_adapter, response_schema = return_json_schema(
            self._signature.return_annotation, self._qualname
        )
        self._override_required: tuple[str, ...] = ()
        parameters = self._signature.parameters_json_schema
        if schema is not None:
            parameters = _ir_to_json_schema(schema) if isinstance(schema, Schema) else dict(schema)
            self._override_required = tuple(parameters.get("required", ()))
        self._declaration = self._declare(parameters, response_schema)

    def defers_response(self) -> bool:
        """A long-running function tool that returns ``None`` has not answered yet."""
        return self._is_long_running

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return the validated keyword arguments; raise ``InvalidToolArgumentsError`` otherwise."""
        missing = [key for key in self._override_required if key not in args]
        if missing:
            raise InvalidToolArgumentsError(
                self._name, errors=[f"{key}: Field required" for key in missing]
            )
        return super().validate_args(args)

    def requires_confirmation_for(self, args: Mapping[str, Any]) -> bool:
        """True when this call needs a human confirmation (flag, or predicate over valid args).

        Raises ``InvalidToolArgumentsError`` when the arguments do not validate.
        """
        validated = self.validate_args(args)
        if callable(self._requires_confirmation):
            return bool(self._requires_confirmation(validated))
        return self._requires_confirmation

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Validate ``args``, call the function and convert its result to a JSON mapping.

        Returns ``None`` only for a long-running tool whose function returned ``None``.
        """
        kwargs = self._call_kwargs(ctx, args)
        if self._is_async:
            result = await self.func(**kwargs)
        else:
            result = await asyncio.to_thread(self.func, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        return self._convert(result)

    def _convert(self, result: Any) -> dict[str, Any] | None:
        if result is None and self._is_long_running:
            return None
        try:
            if self._return_adapter is not None:
                value = self._return_adapter.validate_python(result)
                dumped = self._return_adapter.dump_python(value, mode="json")
                plain = functools.partial(self._return_adapter.dump_python, value, mode="python")
            elif isinstance(result, BaseModel):
                dumped = result.model_dump(mode="json")
                plain = functools.partial(result.model_dump, mode="python")
            else:
                if isinstance(result, Mapping):
                    result = dict(result)
                dumped = to_jsonable_python(result)
                plain = functools.partial(_ANY.dump_python, result, mode="python")
            if _holds_none(dumped, 0):
                # pydantic's JSON mode turns NaN and ±inf into null, a silent change of the
                # result: put them back, so the log's check refuses them naming the path.
                dumped = _with_non_finite(dumped, plain(), 0)
        except pydantic.ValidationError as exc:
            raise ToolResultError(
                f"Tool {self._name!r} returned a value that does not match its return "
                f"annotation: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}",
                tool_name=self._name,
            ) from exc
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise ToolResultError(
                f"Tool {self._name!r} returned a value of type {type(result).__name__} that "
                f"cannot be converted to JSON: {exc}",
                tool_name=self._name,
            ) from exc
        if isinstance(dumped, dict):
            return dumped
        return {"result": dumped}


_ANY: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Any)

_CONVERSION_DEPTH = 256
"""Beyond this nesting the log refuses a value anyway (``eventstore.MAX_JSON_DEPTH``)."""


def _holds_none(value: Any, depth: int) -> bool:
    if value is None:
        return True
    if depth > _CONVERSION_DEPTH:
        return False
    if isinstance(value, dict):
        return any(_holds_none(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_holds_none(v, depth + 1) for v in value)
    return False


def _with_non_finite(dumped: Any, plain: Any, depth: int) -> Any:
    """``dumped`` (JSON mode) with each null that is a non-finite float in ``plain`` (the same
    result in Python mode) replaced by that float; elsewhere ``dumped`` unchanged."""
    if dumped is None:
        return plain if isinstance(plain, float) and not math.isfinite(plain) else None
    if depth > _CONVERSION_DEPTH:
        return dumped
    if isinstance(dumped, dict) and isinstance(plain, Mapping):
        return {
            key: _with_non_finite(item, plain[key], depth + 1) if key in plain else item
            for key, item in dumped.items()
        }
    if (
        isinstance(dumped, list)
        and isinstance(plain, (list, tuple))
        and len(plain) == len(dumped)
    ):
        return [_with_non_finite(item, p, depth + 1) for item, p in zip(dumped, plain, strict=True)]
    return dumped


@overload
def function_tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def function_tool(
    **options: Unpack[ToolOptions],
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    func: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a function into a ``FunctionTool``; usable as ``@function_tool`` or with options
    (``ToolOptions``: ``FunctionTool``'s keyword arguments).

    Raises ``ToolDefinitionError`` at decoration time when the function cannot be a tool.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, **options)

    return wrap(func) if func is not None else wrap


@dataclass(frozen=True)
class _Marked:
    options: ToolOptions


_OPTIONS_ATTR = "__tool_options__"


@overload
def tool_method(func: _F, /) -> _F: ...


@overload
def tool_method(**options: Unpack[ToolOptions]) -> Callable[[_F], _F]: ...


def tool_method(
    func: _F | None = None, /, **options: Unpack[ToolOptions]
) -> _F | Callable[[_F], _F]:
    """Mark a method of a ``ToolsetClass`` subclass as a tool (options as for ``function_tool``);
    the method itself is unchanged. Raises ``TypeError`` for an option ``FunctionTool`` lacks."""
    unknown = sorted(set(options) - set(ToolOptions.__annotations__))
    if unknown:
        raise TypeError(f"tool_method() got unexpected option(s): {', '.join(unknown)}.")
    marked = _Marked(options)

    def mark(f: _F) -> _F:
        setattr(f, _OPTIONS_ATTR, marked)
        return f

    return mark(func) if func is not None else mark


class ToolsetClass:
    """A toolset whose tools are the ``@tool_method`` methods of its class, bound to the instance.

    Methods are checked when the subclass is defined, so a bad signature fails at import time.
    A subclass that overrides a marked method without the decorator removes that tool.
    """

    _tool_methods: ClassVar[dict[str, ToolOptions]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods: dict[str, ToolOptions] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                marked = getattr(value, _OPTIONS_ATTR, None)
                if isinstance(marked, _Marked):
                    methods[attr] = marked.options
                else:
                    methods.pop(attr, None)
        for attr, options in methods.items():
            function = _class_attribute(cls, attr)
            if not inspect.isfunction(function):
                raise ToolDefinitionError(
                    f"{cls.__qualname__}.{attr} is marked with @tool_method but is not a plain "
                    f"method (static and class methods are not supported).",
                    tool_name=options.get("name") or attr,
                )
            infer_signature(function, skip_first=True, tool_name=options.get("name") or attr)
        cls._tool_methods = methods

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return one ``FunctionTool`` per marked method, bound to this instance (built once)."""
        return self._tool_cache

    @functools.cached_property
    def _tool_cache(self) -> tuple[FunctionTool, ...]:
        tools: list[FunctionTool] = []
        for attr, options in self._tool_methods.items():
            named = options.copy()
            named["name"] = options.get("name") or attr
            tools.append(FunctionTool(getattr(self, attr), **named))
        return tuple(tools)


def _class_attribute(cls: type, attr: str) -> Any:
    for klass in cls.__mro__:
        if attr in vars(klass):
            return vars(klass)[attr]
    raise AttributeError(attr)


def _is_async_callable(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)
