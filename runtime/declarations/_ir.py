"""The provider-neutral declaration IR: what a model is told about one function.

The IR is a small tree of frozen values. It says nothing in any provider's dialect: no ``$ref``, no
``anyOf`` with ``null`` (that is ``nullable``), no type lists. Translators in ``_translate`` turn
it into each provider's JSON.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["UNSET", "FunctionDeclaration", "Schema", "SchemaType", "Unset"]


class SchemaType(enum.StrEnum):
    """The JSON types a schema node can have (stable lowercase JSON Schema names)."""

    OBJECT = "object"
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ARRAY = "array"
    NULL = "null"


class Unset:
    """Type of ``UNSET``: marks a field that was not given, where ``None`` is a real value."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset()
"""The single ``Unset`` value (``Schema.default`` when the schema gives no default)."""


@dataclass(frozen=True, kw_only=True)
class Schema:
    """One node of a parameter or response schema.

    Guarantees: the tree is finite (references were inlined when it was built); ``required`` only
    names keys of ``properties``; ``type is None`` means "any JSON value" (then ``any_of`` may list
    the alternatives). Mappings are plain dicts for cheap construction; treat them as read-only.
    """

    type: SchemaType | None = None
    """The JSON type, or ``None`` for any value / a union described by ``any_of``."""
    nullable: bool = False
    """``null`` is accepted besides ``type``."""
    description: str | None = None
    """Human (and model) readable description."""
    enum: tuple[Any, ...] | None = None
    """The only allowed values, when restricted."""
    format: str | None = None
    """A format hint such as ``date-time`` or ``uuid``."""
    properties: Mapping[str, Schema] = field(default_factory=dict)
    """Object members by name, in declaration order."""
    required: tuple[str, ...] = ()
    """Names of required object members."""
    additional_properties: Schema | bool | None = None
    """Schema of extra object members; ``False`` forbids them; ``None`` says nothing."""
    items: Schema | None = None
    """Schema of array elements."""
    any_of: tuple[Schema, ...] = ()
    """Alternatives of a union that is not just "X or null"."""
    default: Any = UNSET
    """The default value, ``UNSET`` when there is none."""

    def __post_init__(self) -> None:
        unknown = [name for name in self.required if name not in self.properties]
        if unknown:
            raise ValueError(f"Schema.required names unknown properties: {', '.join(unknown)}.")


EMPTY_OBJECT: Final = Schema(type=SchemaType.OBJECT)


@dataclass(frozen=True, kw_only=True)
class FunctionDeclaration:
    """What a model sees of one function tool: name, description, parameters, response.

    Guarantees: ``parameters`` is an object schema; the declaration is provider-neutral and turns
    into each provider's JSON with ``to_openai``, ``to_anthropic`` and ``to_gemini``.
    """

    name: str
    """The function name the model calls; unique within one request."""
    description: str = ""
    """What the function does, for the model."""
    parameters: Schema = EMPTY_OBJECT
    """Object schema of the arguments."""
    response: Schema | None = None
    """Schema of the response mapping, when known."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("A FunctionDeclaration needs a non-empty name.")
        if self.parameters.type is not SchemaType.OBJECT:
            raise ValueError(
                f"The parameters of function {self.name!r} must be an object schema, "
                f"not {self.parameters.type}."
            )
