"""What every model adapter shares: SDK import, API keys, and small pure helpers.

The adapters (``_openai``, ``_anthropic``, ``_gemini``) are each a pure translation layer
(``ModelRequest`` → the provider's request body, the provider's reply → ``ModelResponse``) plus a
thin I/O shell around the provider's official SDK. The SDK is imported only when an adapter is
built, so ``import runtime.models`` works without any extra installed.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

import orjson

from eventstore import ArtifactRef
from runtime._context import ToolContext
from runtime._exceptions import ToolDefinitionError
from runtime.models._errors import MissingExtraError, ModelConfigurationError
from runtime.tools import ModelRequest

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "NativeTool",
    "RAW_ARGUMENTS_KEY",
    "artifact_placeholder",
    "dump_arguments",
    "dump_response",
    "import_sdk",
    "is_error_response",
    "join_instructions",
    "parse_arguments",
    "resolve_api_key",
    "unsupported_native_tool",
]

DEFAULT_MAX_RETRIES: Final = 2
"""Retries of a transient failure (429, 5xx, 529, connection) with the SDK's own backoff."""

RAW_ARGUMENTS_KEY: Final = "_unparsed_arguments"
"""Key under which a call keeps arguments the model sent as text that is not a JSON object.

The tool then refuses them (the model gets an ``invalid_arguments`` error and can try again) and
the text is sent back to the provider exactly as the model wrote it.
"""


def import_sdk(module: str, *, extra: str, adapter: str) -> ModuleType:
    """Import an adapter's SDK; raise ``MissingExtraError`` naming the extra when it is absent."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{adapter} needs the {module} package: install agent-eventstore[{extra}].",
            extra=extra,
        ) from exc


def resolve_api_key(
    api_key: str | None, *, env_var: str, adapter: str, required: bool = True
) -> str | None:
    """Return ``api_key``, else the environment variable ``env_var``.

    Raises ``ModelConfigurationError`` naming the variable when neither is set and ``required``.
    """
    if api_key:
        return api_key
    found = os.environ.get(env_var)
    if found:
        return found
    if required:
        raise ModelConfigurationError(
            f"{adapter} needs an API key: set the {env_var} environment variable "
            f"(or pass api_key=...).",
            env_var=env_var,
        )
    return None


def join_instructions(instructions: Sequence[str]) -> str:
    """Return the system instructions as one text, blank-line separated (empty ones dropped)."""
    return "\n\n".join(text for text in instructions if text)


def dump_response(response: Mapping[str, Any]) -> str:
    """Return a function response as the compact JSON text sent to providers that take text."""
    return orjson.dumps(response, option=orjson.OPT_NON_STR_KEYS).decode()


def is_error_response(response: Mapping[str, Any]) -> bool:
    """True for the runtime's structured error responses (``{"error": {...}}``)."""
    return "error" in response


def dump_arguments(args: Mapping[str, Any]) -> str:
    """Return call arguments as JSON text; text the model sent unparsed goes back verbatim."""
    raw = args.get(RAW_ARGUMENTS_KEY)
    if isinstance(raw, str) and len(args) == 1:
        return raw
    return orjson.dumps(args, option=orjson.OPT_NON_STR_KEYS).decode()


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Return the arguments a model sent as JSON text (``{}`` for none).

    Text that is not a JSON object is kept under ``RAW_ARGUMENTS_KEY`` instead of failing the
    whole turn: the tool refuses it and the model sees why.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {RAW_ARGUMENTS_KEY: raw}
    if not isinstance(parsed, dict):
        return {RAW_ARGUMENTS_KEY: raw}
    return parsed


def artifact_placeholder(ref: ArtifactRef) -> str:
    """Return the text sent in place of an artifact part (its bytes are not in the request)."""
    return (
        f"[artifact {ref.filename} version {ref.version} ({ref.mime_type}) is binary and is not "
        f"sent to this model]"
    )


def unsupported_native_tool(adapter: str, tool: Mapping[str, Any], accepted: str) -> Exception:
    """Return the error for a native tool this provider cannot take (raised by the adapter)."""
    shown = orjson.dumps(tool, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS).decode()
    return ToolDefinitionError(
        f"{adapter} cannot send the native tool {shown}: it accepts {accepted}. Native tools are "
        f"provider-specific; give each agent the ones of its model."
    )


class NativeTool:
    """A provider-native tool (search, code execution …) as an agent tool.

    It has no declaration and no local handler: its ``process_request`` appends ``spec`` (the
    provider's own JSON, e.g. ``{"googleSearch": {}}`` for Gemini) to ``request.native_tools``,
    where the adapter sends it as given; an adapter of another provider refuses it with a
    ``ToolDefinitionError``. The model's use of it happens on the provider's side and is never a
    function call in the log.
    """

    def __init__(self, name: str, spec: Mapping[str, Any], *, description: str = "") -> None:
        self._name = name
        self._spec = dict(spec)
        self._description = description or f"Provider-native tool {name}."

    @property
    def name(self) -> str:
        """The tool's name in the agent (never called as a function)."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool is, for people reading the agent."""
        return self._description

    @property
    def is_long_running(self) -> bool:
        """Never: the provider runs it within the model call."""
        return False

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Append a copy of the spec to ``request.native_tools``."""
        request.native_tools.append(dict(self._spec))

    def __repr__(self) -> str:
        return f"NativeTool({self._name!r}, {self._spec!r})"
