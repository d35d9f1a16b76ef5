"""Golden translations of one declaration per provider, plus properties of every translation."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runtime.declarations import (
    Schema,
    SchemaType,
    declaration_from_json_schema,
    schema_from_json_schema,
    schema_to_gemini,
    schema_to_json_schema,
    to_anthropic,
    to_gemini,
    to_openai,
)

# A pydantic-shaped schema: $ref into $defs, Optional as anyOf-with-null, an enum, a list of
# nested objects, a dict, a non-string enum.
SOURCE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "units": {"$ref": "#/$defs/Units", "default": "c"},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
        "level": {"enum": [1, 2], "type": "integer"},
    },
    "required": ["city", "stops"],
    "additionalProperties": False,
    "$defs": {
        "Units": {"enum": ["c", "f"], "type": "string"},
        "Stop": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "minutes": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
            "required": ["name", "minutes"],
        },
    },
}

DECLARATION = declaration_from_json_schema(
    "plan_trip",
    description="Plan a trip.",
    parameters=SOURCE,
    response={"type": "object", "properties": {"ok": {"type": "boolean"}}},
)

JSON_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "stops": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "minutes": {"type": ["integer", "null"]},
                },
                "required": ["name", "minutes"],
            },
        },
        "note": {"type": ["string", "null"], "default": None},
        "tags": {
            "type": "object",
            "properties": {},
            "additionalProperties": {"type": "integer"},
        },
        "level": {"type": "integer", "enum": [1, 2]},
    },
    "required": ["city", "stops"],
    "additionalProperties": False,
}


def test_to_openai_golden() -> None:
    assert to_openai(DECLARATION) == {
        "type": "function",
        "function": {
            "name": "plan_trip",
            "description": "Plan a trip.",
            "parameters": JSON_PARAMETERS,
        },
    }


def test_to_anthropic_golden() -> None:
    assert to_anthropic(DECLARATION) == {
        "name": "plan_trip",
        "description": "Plan a trip.",
        "input_schema": JSON_PARAMETERS,
    }


def test_to_gemini_golden() -> None:
    assert to_gemini(DECLARATION) == {
        "name": "plan_trip",
        "description": "Plan a trip.",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "city": {"type": "STRING", "description": "City name"},
                "units": {"type": "STRING", "enum": ["c", "f"], "format": "enum", "default": "c"},
                "stops": {
                    "type": "ARRAY",
                    "items": {
                        "type": "OBJECT",
                        "properties": {
                            "name": {"type": "STRING"},
                            "minutes": {"type": "INTEGER", "nullable": True},
                        },
                        "required": ["name", "minutes"],
                    },
                },
                "note": {"type": "STRING", "nullable": True, "default": None},
                "tags": {"type": "OBJECT"},
                "level": {"type": "INTEGER", "description": "(allowed values: 1, 2)"},
            },
            "required": ["city", "stops"],
        },
        "response": {"type": "OBJECT", "properties": {"ok": {"type": "BOOLEAN"}}},
    }


def test_to_gemini_omits_parameters_without_arguments() -> None:
    declaration = declaration_from_json_schema("ping", description="Ping.")
    assert to_gemini(declaration) == {"name": "ping", "description": "Ping."}
    assert to_openai(declaration)["function"]["parameters"] == {"type": "object", "properties": {}}


def test_schema_to_json_schema_nullable_enum_accepts_null() -> None:
    schema = Schema(type=SchemaType.STRING, enum=("a",), nullable=True)
    assert schema_to_json_schema(schema) == {"type": ["string", "null"], "enum": ["a", None]}
    assert schema_to_gemini(schema) == {
        "type": "STRING",
        "nullable": True,
        "enum": ["a"],
        "format": "enum",
    }


def test_schema_to_json_schema_union_keeps_null_alternative() -> None:
    schema = schema_from_json_schema(
        {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}
    )
    assert schema_to_json_schema(schema) == {
        "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]
    }
    assert schema_to_gemini(schema) == {
        "anyOf": [{"type": "INTEGER"}, {"type": "STRING"}],
        "nullable": True,
    }


# --- properties -----------------------------------------------------------------------------------

_leaf = st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t})


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.text(alphabet="abcdefgh", min_size=1, max_size=4)
    return st.one_of(
        st.builds(lambda item: {"type": "array", "items": item}, children),
        st.builds(lambda inner: {"anyOf": [inner, {"type": "null"}]}, children),
        st.dictionaries(names, children, max_size=3).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]}
        ),
    )


json_schemas = st.recursive(_leaf, _extend, max_leaves=12)


def _wrap_in_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Move the schema into $defs and refer to it, as pydantic does for models."""
    return {
        "type": "object",
        "properties": {"value": {"$ref": "#/$defs/Value"}},
        "$defs": {"Value": schema},
    }


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set(node)
        for value in node.values():
            found |= _keys(value)
        return found
    if isinstance(node, list):
        return set().union(*(_keys(v) for v in node)) if node else set()
    return set()


def _types(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["type"]} if isinstance(node.get("type"), str) else set()
        for key, value in node.items():
            if key != "properties":
                found |= _types(value)
        for value in (node.get("properties") or {}).values():
            found |= _types(value)
        return found
    if isinstance(node, list):
        return set().union(*(_types(v) for v in node)) if node else set()
    return set()


@given(json_schemas)
def test_translations_never_emit_refs(schema: dict[str, Any]) -> None:
    declaration = declaration_from_json_schema("f", parameters=_wrap_in_refs(schema))
    for translated in (to_openai(declaration), to_anthropic(declaration), to_gemini(declaration)):
        assert not _keys(translated) & {"$ref", "$defs", "definitions"}


@given(json_schemas)
def test_to_gemini_uses_only_uppercase_types_and_no_additional_properties(
    schema: dict[str, Any],
) -> None:
    gemini = to_gemini(declaration_from_json_schema("f", parameters=_wrap_in_refs(schema)))
    assert "additionalProperties" not in _keys(gemini)
    assert all(t.isupper() for t in _types(gemini))


@given(json_schemas)
def test_schema_json_schema_round_trip(schema: dict[str, Any]) -> None:
    ir = schema_from_json_schema(schema)
    assert schema_from_json_schema(schema_to_json_schema(ir)) == ir
