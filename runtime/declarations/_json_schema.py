"""Conversion from JSON Schema (as pydantic and MCP servers emit it) to the declaration IR.

References (``$ref`` into ``$defs``/``definitions``) are inlined; a recursive reference or a tree
deeper than the limit is refused with a ``SchemaConversionError`` that names the location.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from runtime._exceptions import SchemaConversionError
from runtime.declarations._ir import UNSET, FunctionDeclaration, Schema, SchemaType

__all__ = ["DEFAULT_MAX_DEPTH", "declaration_from_json_schema", "schema_from_json_schema"]

DEFAULT_MAX_DEPTH = 32
"""Deepest nesting of schema nodes accepted by default."""

_TYPES = {t.value: t for t in SchemaType}


def schema_from_json_schema(
    json_schema: Mapping[str, Any], *, max_depth: int = DEFAULT_MAX_DEPTH
) -> Schema:
    """Return the IR of a JSON schema, with all local ``$ref`` inlined.

    ``anyOf``/``oneOf`` of X and ``null`` and type lists like ``["string", "null"]`` become
    ``nullable``; ``const`` becomes a one-value ``enum``; a single-element ``allOf`` is merged.

    Raises ``SchemaConversionError`` for a recursive or unresolvable ``$ref``, an unknown type, or
    nesting deeper than ``max_depth``.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        section = json_schema.get(key)
        if isinstance(section, Mapping):
            for name, value in section.items():
                defs[f"#/{key}/{name}"] = value
    return _Converter(defs, max_depth).convert(json_schema, "#", 0, ())


def declaration_from_json_schema(
    name: str,
    *,
    description: str = "",
    parameters: Mapping[str, Any] | None = None,
    response: Mapping[str, Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> FunctionDeclaration:
    """Return a declaration whose parameter (and response) schemas come from JSON Schema.

    A missing ``parameters`` means "no arguments". Raises ``SchemaConversionError`` (naming the
    tool) when a schema cannot be converted or the parameters are not an object schema.
    """
    try:
        params = (
            Schema(type=SchemaType.OBJECT)
            if parameters is None
            else schema_from_json_schema(parameters, max_depth=max_depth)
        )
        result = (
            None if response is None else schema_from_json_schema(response, max_depth=max_depth)
        )
    except SchemaConversionError as exc:
        raise SchemaConversionError(f"Tool {name!r}: {exc}", path=exc.path, tool_name=name) from exc
    if params.type is not SchemaType.OBJECT:
        raise SchemaConversionError(
            f"Tool {name!r}: the parameters schema must describe an object, not "
            f"{params.type or 'any value'}.",
            path="#",
            tool_name=name,
        )
    return FunctionDeclaration(
        name=name, description=description, parameters=params, response=result
    )


class _Converter:
    def __init__(self, defs: Mapping[str, Any], max_depth: int) -> None:
        self._defs = defs
        self._max_depth = max_depth

    def convert(self, node: Any, path: str, depth: int, refs: tuple[str, ...]) -> Schema:
        if depth > self._max_depth:
            raise SchemaConversionError(
                f"The schema is nested deeper than {self._max_depth} levels at {path}.",
                path=path,
            )
        if node is True or node == {}:
            return Schema()
        if not isinstance(node, Mapping):
            raise SchemaConversionError(
                f"Expected a schema object at {path}, got {node!r}.", path=path
            )
        if "$ref" in node:
            return self._convert_ref(node, path, depth, refs)
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            merged = {k: v for k, v in node.items() if k != "allOf"}
            return self._overlay(
                self.convert(all_of[0], f"{path}/allOf/0", depth + 1, refs), merged
            )
        if "allOf" in node:
            raise SchemaConversionError(
                f"allOf with several members is not supported (at {path}).", path=path
            )

        union = node.get("anyOf", node.get("oneOf"))
        if isinstance(union, list):
            return self._convert_union(node, union, path, depth, refs)

        nullable = False
        raw_type = node.get("type")
        if isinstance(raw_type, list):
            kinds = [t for t in raw_type if t != "null"]
            nullable = len(kinds) < len(raw_type)
            if len(kinds) > 1:
                alternatives = tuple(
                    self.convert({**node, "type": kind}, f"{path}/type", depth + 1, refs)
                    for kind in kinds
                )
                return Schema(
                    any_of=alternatives,
                    nullable=nullable,
                    description=node.get("description"),
                    default=node.get("default", UNSET),
                )
            raw_type = kinds[0] if kinds else "null"
        schema_type = self._type(raw_type, node, path)

        enum = node.get("enum")
        if "const" in node:
            enum = [node["const"]]
        properties: dict[str, Schema] = {}
        for name, sub in (node.get("properties") or {}).items():
            properties[name] = self.convert(sub, f"{path}/properties/{name}", depth + 1, refs)
        required = tuple(name for name in node.get("required", ()) if name in properties)
        extra = node.get("additionalProperties")
        additional: Schema | bool | None
        if isinstance(extra, bool):
            additional = extra
        elif extra is None:
            additional = None
        else:
            additional = self.convert(extra, f"{path}/additionalProperties", depth + 1, refs)
        items = node.get("items")
        if items is None and isinstance(node.get("prefixItems"), list):
            # A tuple: the IR has no positional items, so describe the element union instead.
            items = {"anyOf": node["prefixItems"]}
        return Schema(
            type=schema_type,
            nullable=nullable,
            description=node.get("description"),
            enum=tuple(enum) if isinstance(enum, list) else None,
            format=node.get("format"),
            properties=properties,
            required=required,
            additional_properties=additional,
            items=None if items is None else self.convert(items, f"{path}/items", depth + 1, refs),
            default=node.get("default", UNSET),
        )

    def _convert_ref(
        self, node: Mapping[str, Any], path: str, depth: int, refs: tuple[str, ...]
    ) -> Schema:
        ref = node["$ref"]
        if ref in refs:
            chain = " -> ".join((*refs, ref))
            raise SchemaConversionError(
                f"The schema is recursive ({chain}) at {path}; recursive types cannot be "
                f"declared to a model. Break the cycle or give an explicit schema.",
                path=path,
            )
        target = self._defs.get(ref)
        if target is None:
            raise SchemaConversionError(
                f"The reference {ref!r} at {path} cannot be resolved; only local $defs are "
                f"supported.",
                path=path,
            )
        resolved = self.convert(target, f"{path}[{ref}]", depth + 1, (*refs, ref))
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return self._overlay(resolved, siblings)

    def _convert_union(
        self,
        node: Mapping[str, Any],
        union: list[Any],
        path: str,
        depth: int,
        refs: tuple[str, ...],
    ) -> Schema:
        members = [m for m in union if not (isinstance(m, Mapping) and m.get("type") == "null")]
        nullable = len(members) < len(union)
        siblings = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        if len(members) == 1:
            inner = self.convert(members[0], f"{path}/anyOf/0", depth + 1, refs)
            result = self._overlay(inner, siblings)
            return _replace(result, nullable=nullable or result.nullable)
        alternatives = tuple(
            self.convert(m, f"{path}/anyOf/{i}", depth + 1, refs) for i, m in enumerate(members)
        )
        return Schema(
            any_of=alternatives,
            nullable=nullable,
            description=siblings.get("description"),
            default=siblings.get("default", UNSET),
        )

    @staticmethod
    def _type(raw_type: Any, node: Mapping[str, Any], path: str) -> SchemaType | None:
        if raw_type is None:
            if "properties" in node:
                return SchemaType.OBJECT
            if "items" in node:
                return SchemaType.ARRAY
            return None
        if raw_type not in _TYPES:
            raise SchemaConversionError(
                f"Unknown JSON schema type {raw_type!r} at {path}.", path=path
            )
        return _TYPES[raw_type]

    @staticmethod
    def _overlay(schema: Schema, siblings: Mapping[str, Any]) -> Schema:
        """Apply the annotations written next to a ``$ref``/``allOf``/``anyOf`` (they win)."""
        changes: dict[str, Any] = {}
        if "description" in siblings:
            changes["description"] = siblings["description"]
        if "default" in siblings:
            changes["default"] = siblings["default"]
        return _replace(schema, **changes) if changes else schema


def _replace(schema: Schema, **changes: Any) -> Schema:
    return dataclasses.replace(schema, **changes)
