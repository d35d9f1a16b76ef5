"""``evs demo --model``: which model drives the demo agent (the scripted one by default).

``openai:MODEL``, ``anthropic:MODEL``, ``gemini:MODEL`` or ``openai-compatible:URL:MODEL`` (any
Chat Completions server, e.g. ``openai-compatible:http://localhost:11434/v1:llama3.2``). A missing
key, a missing extra or a malformed spec is one line naming what to set, install or write.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from eventstore import Event
from eventstore.commands import CliError
from runtime import Model
from runtime.models import (
    AnthropicModel,
    GeminiModel,
    MissingExtraError,
    ModelConfigurationError,
    OpenAIChatModel,
)

from ._demo_agent import AGENT

__all__ = ["MODEL_HELP", "demo_model", "finished"]

MODEL_HELP = (
    "Run the demo on a live model: openai:MODEL, anthropic:MODEL, gemini:MODEL or "
    "openai-compatible:URL:MODEL (keys from OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY). "
    "Default: the scripted model (offline)."
)
"""Help text of the ``--model`` option."""

_EXIT_USAGE = 2  # evs's exit status for bad usage

# The URL ends at the first colon after its host[:port] and path; model names may hold colons.
_COMPATIBLE = re.compile(r"^(https?://[^/\s]+(?:/[^:\s]*)?):(.+)$")


def demo_model(spec: str | None) -> Model | None:
    """Return the model ``spec`` names, or ``None`` for the scripted default.

    Raises ``CliError`` (one line) for a malformed spec, a missing API key (naming its
    environment variable) or a missing extra (naming it).
    """
    if spec is None or spec == "scripted":
        return None
    provider, _, rest = spec.partition(":")
    if not rest:
        raise CliError(
            f"--model {spec!r} names no model; write PROVIDER:MODEL (openai, anthropic, gemini) "
            f"or openai-compatible:URL:MODEL.",
            code=_EXIT_USAGE,
        )
    try:
        if provider == "openai":
            return OpenAIChatModel(rest)
        if provider == "anthropic":
            return AnthropicModel(rest)
        if provider == "gemini":
            return GeminiModel(rest)
        if provider == "openai-compatible":
            match = _COMPATIBLE.match(rest)
            if match is None:
                raise CliError(
                    f"--model {spec!r}: write openai-compatible:URL:MODEL, e.g. "
                    f"openai-compatible:http://localhost:11434/v1:llama3.2.",
                    code=_EXIT_USAGE,
                )
            return OpenAIChatModel(match.group(2), base_url=match.group(1))
    except ModelConfigurationError as exc:
        if exc.env_var is None:
            raise CliError(str(exc)) from exc
        raise CliError(f"--model {spec} needs an API key: set {exc.env_var}.") from exc
    except MissingExtraError as exc:
        raise CliError(f"--model {spec}: {exc}") from exc
    raise CliError(
        f"--model {spec!r}: unknown provider {provider!r}; use openai, anthropic, gemini or "
        f"openai-compatible.",
        code=_EXIT_USAGE,
    )


def finished(events: Sequence[Event]) -> bool:
    """True when the newest event is the demo agent's final answer (text, no calls)."""
    if not events:
        return False
    last = events[-1]
    return (
        last.author == AGENT
        and last.content is not None
        and last.content.role == "model"
        and not last.function_calls()
        and bool(last.text())
    )
