"""Argument schemas inferred from a callable's signature, type hints and docstring (via pydantic).

Every parameter must be passable by keyword and annotated with a type pydantic can turn into JSON
Schema; otherwise the callable is refused at definition time with a ``ToolDefinitionError`` that
names the function and the parameter. A parameter annotated ``ToolContext`` is injected by the
runtime and hidden from the model.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo

from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError, ToolDefinitionError

__all__ = ["InferredSignature", "infer_signature", "parse_docstring"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Yields|Raises|"
    r"Examples?|Notes?|Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args"})


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description}).

    The description is the text before the first section header; parameter descriptions come from
    an ``Args:`` section and may continue on more-indented lines.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        header = _SECTION.match(line.strip()) if not line.startswith(" ") else None
        if header:
            section, current, arg_indent = header.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARG_SECTIONS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


@dataclass(frozen=True, kw_only=True)
class InferredSignature:
    """What a callable's signature says about its arguments and result.

    Guarantees: ``parameters_json_schema`` is an object schema without titles; ``validate`` returns
    keyword arguments ready for the callable (without the context parameter).
    """

    function_name: str
    """Qualified name of the callable, for messages."""
    description: str
    """Docstring description (text before the first section)."""
    parameters_json_schema: dict[str, Any]
    """JSON Schema of the arguments, as the model sees them."""
    context_parameter: str | None
    """Name of the parameter that receives the ToolContext, if any."""
    return_annotation: Any
    """The return annotation, ``inspect.Parameter.empty`` when there is none."""
    _model: type[BaseModel]
    _field_names: Mapping[str, str]

    def validate(self, tool_name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return validated keyword arguments; raise ``InvalidToolArgumentsError`` otherwise."""
        try:
            instance = self._model.model_validate(dict(args))
        except pydantic.ValidationError as exc:
            raise InvalidToolArgumentsError(tool_name, errors=_error_lines(exc)) from exc
        return {param: getattr(instance, field) for param, field in self._field_names.items()}


def infer_signature(
    func: Callable[..., Any], *, skip_first: bool = False, tool_name: str | None = None
) -> InferredSignature:
    """Return the argument schema of ``func``; ``skip_first`` drops ``self`` of a plain method.

    Raises ``ToolDefinitionError`` for ``*args``/``**kwargs``, positional-only parameters, missing
    annotations and annotations that have no JSON schema.
    """
    hint_source: Any = func
    while isinstance(hint_source, functools.partial):
        hint_source = hint_source.func
    if not inspect.isroutine(hint_source) and not inspect.isclass(hint_source):
        hint_source = type(hint_source).__call__
    qualname = getattr(func, "__qualname__", None) or hint_source.__qualname__
    try:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(hint_source, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(
            f"The signature of {qualname} cannot be read: {exc}", tool_name=tool_name
        ) from exc
    description, doc_params = parse_docstring(inspect.getdoc(func))
    parameters = list(signature.parameters.values())
    if skip_first:
        parameters = parameters[1:]

    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    context_parameter: str | None = None
    for index, param in enumerate(parameters):
        where = f"parameter {param.name!r} of {qualname}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"The {where} is variadic; a tool's arguments must be named parameters. "
                f"Give an explicit schema or name the parameters.",
                tool_name=tool_name,
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"The {where} is positional-only; models pass arguments by name.",
                tool_name=tool_name,
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"The {where} has no type annotation; annotate it so its schema can be inferred.",
                tool_name=tool_name,
            )
        annotation = hints[param.name]
        if _is_context(annotation):
            context_parameter = param.name
            continue
        base, text = _split_annotated(annotation)
        if isinstance(param.default, FieldInfo):
            base = Annotated.__class_getitem__((base, param.default))  # type: ignore[attr-defined]
        _check_json_schema(base, where, tool_name)
        options: dict[str, Any] = {"alias": param.name}
        if param.default is not param.empty and not isinstance(param.default, FieldInfo):
            options["default"] = param.default
        if not _has_field_description(base):
            description_text = text or doc_params.get(param.name)
            if description_text:
                options["description"] = description_text
        # Fields get neutral names and the parameter name as alias, so parameters may be called
        # "json", "schema" or "_private" without clashing with BaseModel attributes.
        field_name = f"p{index}"
        info = pydantic.Field(**options)
        fields[field_name] = (base, info)
        field_names[param.name] = field_name

    config = ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False)
    model_name = re.sub(r"\W", "_", qualname) + "_Args"
    try:
        model = pydantic.create_model(model_name, __config__=config, **fields)
        json_schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolDefinitionError(
            f"The parameters of {qualname} cannot form a JSON schema: {exc}", tool_name=tool_name
        ) from exc
    return InferredSignature(
        function_name=qualname,
        description=description,
        parameters_json_schema=_strip_titles(json_schema),
        context_parameter=context_parameter,
        return_annotation=hints.get("return", inspect.Parameter.empty),
        _model=model,
        _field_names=field_names,
    )


def return_json_schema(annotation: Any, qualname: str) -> tuple[TypeAdapter[Any] | None, Any]:
    """Return (adapter, JSON schema of the response mapping) for a return annotation.

    ``(None, None)`` when the annotation says nothing useful (missing, ``Any``, ``None``). A value
    that is not a mapping is described wrapped as ``{"result": value}``.
    """
    if annotation in (inspect.Parameter.empty, Any, None, type(None)):
        return None, None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(mode="serialization")
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolDefinitionError(
            f"The return annotation of {qualname} ({annotation!r}) has no JSON schema: {exc}"
        ) from exc
    schema = _strip_titles(schema)
    if schema.get("type") != "object":
        defs = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        if defs:
            schema["$defs"] = defs
    return adapter, schema


def _is_context(annotation: Any) -> bool:
    base = typing.get_args(annotation)[0] if _is_annotated(annotation) else annotation
    return isinstance(base, type) and issubclass(base, ToolContext)


def _is_annotated(annotation: Any) -> bool:
    return typing.get_origin(annotation) is Annotated


def _split_annotated(annotation: Any) -> tuple[Any, str | None]:
    """Return the annotation without bare-string metadata, and the first such string."""
    if not _is_annotated(annotation):
        return annotation, None
    base, *metadata = typing.get_args(annotation)
    texts = [m for m in metadata if isinstance(m, str)]
    rest = [m for m in metadata if not isinstance(m, str)]
    kept = Annotated.__class_getitem__((base, *rest)) if rest else base  # type: ignore[attr-defined]
    return kept, texts[0] if texts else None


def _has_field_description(annotation: Any) -> bool:
    if not _is_annotated(annotation):
        return False
    return any(
        isinstance(m, FieldInfo) and m.description is not None
        for m in typing.get_args(annotation)[1:]
    )


def _check_json_schema(annotation: Any, where: str, tool_name: str | None) -> None:
    try:
        TypeAdapter(annotation).json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolDefinitionError(
            f"The {where} is annotated {annotation!r}, which has no JSON schema: {exc}",
            tool_name=tool_name,
        ) from exc


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for the model); keep property names."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _error_lines(exc: pydantic.ValidationError) -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        lines.append(f"{location}: {error['msg']}")
    return lines
