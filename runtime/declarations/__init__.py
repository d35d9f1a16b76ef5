"""Provider-neutral function declarations and their translation to provider JSON.

Build a ``FunctionDeclaration`` from JSON Schema with ``declaration_from_json_schema`` (or
``schema_from_json_schema`` for one schema), then send ``to_openai``/``to_anthropic``/``to_gemini``.
"""

from runtime.declarations._ir import UNSET, FunctionDeclaration, Schema, SchemaType, Unset
from runtime.declarations._json_schema import (
    DEFAULT_MAX_DEPTH,
    declaration_from_json_schema,
    schema_from_json_schema,
)
from runtime.declarations._translate import (
    schema_to_gemini,
    schema_to_json_schema,
    to_anthropic,
    to_gemini,
    to_openai,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "FunctionDeclaration",
    "Schema",
    "SchemaType",
    "UNSET",
    "Unset",
    "declaration_from_json_schema",
    "schema_from_json_schema",
    "schema_to_gemini",
    "schema_to_json_schema",
    "to_anthropic",
    "to_gemini",
    "to_openai",
]
