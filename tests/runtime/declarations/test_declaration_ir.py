"""Building the declaration IR from JSON Schema."""

from __future__ import annotations

import pytest

from runtime import SchemaConversionError
from runtime.declarations import (
    UNSET,
    FunctionDeclaration,
    Schema,
    SchemaType,
    declaration_from_json_schema,
    schema_from_json_schema,
)


def test_schema_from_json_schema_inlines_refs() -> None:
    json_schema = {
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Address", "description": "Where they live"}},
        "required": ["home"],
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"street": {"type": "string"}},
                "required": ["street"],
            }
        },
    }

    schema = schema_from_json_schema(json_schema)

    home = schema.properties["home"]
    assert home.type is SchemaType.OBJECT
    assert home.description == "Where they live"
    assert home.properties["street"] == Schema(type=SchemaType.STRING)
    assert home.required == ("street",)


@pytest.mark.parametrize(
    "node",
    [
        pytest.param({"anyOf": [{"type": "integer"}, {"type": "null"}]}, id="anyOf"),
        pytest.param({"oneOf": [{"type": "null"}, {"type": "integer"}]}, id="oneOf"),
        pytest.param({"type": ["integer", "null"]}, id="type-list"),
    ],
)
def test_schema_from_json_schema_nullable_forms(node: dict[str, object]) -> None:
    schema = schema_from_json_schema(node)
    assert schema == Schema(type=SchemaType.INTEGER, nullable=True)


def test_schema_from_json_schema_keeps_real_unions() -> None:
    schema = schema_from_json_schema(
        {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}], "default": None}
    )
    assert schema.type is None
    assert schema.nullable
    assert [s.type for s in schema.any_of] == [SchemaType.INTEGER, SchemaType.STRING]
    assert schema.default is None


def test_schema_from_json_schema_const_and_single_allof() -> None:
    schema = schema_from_json_schema(
        {"allOf": [{"type": "string", "const": "x"}], "description": "only x"}
    )
    assert schema == Schema(type=SchemaType.STRING, enum=("x",), description="only x")


def test_schema_from_json_schema_default_is_unset_when_absent() -> None:
    assert schema_from_json_schema({"type": "string"}).default is UNSET
    assert schema_from_json_schema({"type": "string", "default": None}).default is None


def test_schema_from_json_schema_refuses_recursive_ref() -> None:
    json_schema = {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    with pytest.raises(SchemaConversionError, match="recursive") as info:
        schema_from_json_schema(json_schema)
    assert "children" in info.value.path


def test_schema_from_json_schema_refuses_unresolvable_ref() -> None:
    with pytest.raises(SchemaConversionError, match="cannot be resolved"):
        schema_from_json_schema({"$ref": "https://example.com/schema.json"})


def test_schema_from_json_schema_enforces_depth_limit() -> None:
    node: dict[str, object] = {"type": "string"}
    for _ in range(10):
        node = {"type": "array", "items": node}
    assert schema_from_json_schema(node, max_depth=10).type is SchemaType.ARRAY
    with pytest.raises(SchemaConversionError, match="deeper than 9"):
        schema_from_json_schema(node, max_depth=9)


def test_schema_from_json_schema_refuses_unknown_type() -> None:
    with pytest.raises(SchemaConversionError, match="Unknown JSON schema type 'decimal'"):
        schema_from_json_schema({"type": "decimal"})


def test_declaration_from_json_schema_requires_object_parameters() -> None:
    with pytest.raises(SchemaConversionError, match=r"'f'.*must describe an object") as info:
        declaration_from_json_schema("f", parameters={"type": "string"})
    assert info.value.tool_name == "f"


def test_declaration_from_json_schema_defaults_to_no_arguments() -> None:
    declaration = declaration_from_json_schema("ping", description="Ping.")
    assert declaration == FunctionDeclaration(
        name="ping", description="Ping.", parameters=Schema(type=SchemaType.OBJECT)
    )


def test_schema_rejects_required_names_that_are_not_properties() -> None:
    with pytest.raises(ValueError, match="unknown properties: b"):
        Schema(type=SchemaType.OBJECT, properties={"a": Schema()}, required=("a", "b"))


def test_function_declaration_rejects_non_object_parameters() -> None:
    with pytest.raises(ValueError, match="must be an object schema"):
        FunctionDeclaration(name="f", parameters=Schema(type=SchemaType.STRING))
