"""Translation of the declaration IR into each provider's tool JSON.

All translators are pure functions returning fresh plain dicts (JSON values only); none emits
``$ref`` or ``$defs``, since the IR has none.
"""

from __future__ import annotations

from typing import Any

from runtime.declarations._ir import UNSET, FunctionDeclaration, Schema, SchemaType

__all__ = [
    "schema_to_gemini",
    "schema_to_json_schema",
    "to_anthropic",
    "to_gemini",
    "to_openai",
]


def schema_to_json_schema(schema: Schema) -> dict[str, Any]:
    """Return ``schema`` as self-contained JSON Schema (nullable as a type list with ``null``)."""
    out: dict[str, Any] = {}
    if schema.any_of:
        alternatives = [schema_to_json_schema(s) for s in schema.any_of]
        if schema.nullable:
            alternatives.append({"type": "null"})
        out["anyOf"] = alternatives
    elif schema.type is not None:
        out["type"] = [schema.type.value, "null"] if schema.nullable else schema.type.value
    if schema.description:
        out["description"] = schema.description
    if schema.enum is not None:
        values = list(schema.enum)
        if schema.nullable and None not in values:
            values.append(None)
        out["enum"] = values
    if schema.format:
        out["format"] = schema.format
    if schema.properties or schema.type is SchemaType.OBJECT:
        out["properties"] = {
            name: schema_to_json_schema(sub) for name, sub in schema.properties.items()
        }
    if schema.required:
        out["required"] = list(schema.required)
    if isinstance(schema.additional_properties, bool):
        out["additionalProperties"] = schema.additional_properties
    elif schema.additional_properties is not None:
        out["additionalProperties"] = schema_to_json_schema(schema.additional_properties)
    if schema.items is not None:
        out["items"] = schema_to_json_schema(schema.items)
    if schema.default is not UNSET:
        out["default"] = schema.default
    return out


def schema_to_gemini(schema: Schema) -> dict[str, Any]:
    """Return ``schema`` in Gemini's OpenAPI subset.

    Types are uppercase (``"STRING"``), null is ``nullable: true``, ``additionalProperties`` is
    dropped (Gemini rejects it), and enums of non-string values become a sentence in the
    description because Gemini only accepts string enums.
    """
    out: dict[str, Any] = {}
    if schema.any_of:
        out["anyOf"] = [schema_to_gemini(s) for s in schema.any_of]
    elif schema.type is not None:
        out["type"] = schema.type.value.upper()
    if schema.nullable:
        out["nullable"] = True
    description = schema.description or ""
    if schema.enum is not None:
        values = [v for v in schema.enum if v is not None]
        if schema.type is SchemaType.STRING and all(isinstance(v, str) for v in values):
            out["enum"] = values
            out["format"] = "enum"
        else:
            allowed = ", ".join(_literal(v) for v in values)
            description = f"{description} (allowed values: {allowed})".strip()
    if description:
        out["description"] = description
    if schema.format and "format" not in out:
        out["format"] = schema.format
    if schema.properties:
        out["properties"] = {name: schema_to_gemini(sub) for name, sub in schema.properties.items()}
    if schema.required:
        out["required"] = list(schema.required)
    if schema.items is not None:
        out["items"] = schema_to_gemini(schema.items)
    if schema.default is not UNSET:
        out["default"] = schema.default
    return out


def to_openai(declaration: FunctionDeclaration) -> dict[str, Any]:
    """Return an OpenAI chat-completions tool: ``{"type": "function", "function": {...}}``."""
    return {
        "type": "function",
        "function": {
            "name": declaration.name,
            "description": declaration.description,
            "parameters": schema_to_json_schema(declaration.parameters),
        },
    }


def to_anthropic(declaration: FunctionDeclaration) -> dict[str, Any]:
    """Return an Anthropic messages tool: ``{"name", "description", "input_schema"}``."""
    return {
        "name": declaration.name,
        "description": declaration.description,
        "input_schema": schema_to_json_schema(declaration.parameters),
    }


def to_gemini(declaration: FunctionDeclaration) -> dict[str, Any]:
    """Return a Gemini function declaration: ``{"name", "description", "parameters"}``.

    ``parameters`` is left out for a function without arguments (Gemini rejects an empty object
    schema there); ``response`` is included when the declaration has one.
    """
    out: dict[str, Any] = {"name": declaration.name, "description": declaration.description}
    if declaration.parameters.properties:
        out["parameters"] = schema_to_gemini(declaration.parameters)
    if declaration.response is not None:
        out["response"] = schema_to_gemini(declaration.response)
    return out


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
