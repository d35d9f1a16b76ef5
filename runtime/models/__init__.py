"""Model adapters: real LLMs behind the runtime's ``Model`` protocol.

``OpenAIChatModel`` (Chat Completions: OpenAI, Azure OpenAI and any compatible server through
``base_url``), ``AnthropicModel`` (Messages API) and ``GeminiModel`` (google-genai). Each is built
on its provider's official SDK, an optional extra (``[openai]``, ``[anthropic]``, ``[gemini]``,
``[models]`` for all) imported only when the adapter is built. Each module is a pure translation
(``*_request_body``, ``*_response``, ``*StreamState``) plus a thin I/O shell; every adapter also
streams text (``StreamingModel``). Failures are ``ModelError`` subclasses.
"""

from runtime.models._anthropic import (
    DEFAULT_MAX_TOKENS,
    AnthropicModel,
    AnthropicStreamState,
    anthropic_messages,
    anthropic_request_body,
    anthropic_response,
)
from runtime.models._base import DEFAULT_MAX_RETRIES, RAW_ARGUMENTS_KEY, NativeTool
from runtime.models._errors import (
    MissingExtraError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConfigurationError,
    ModelConnectionError,
    ModelContextLengthError,
    ModelError,
    ModelOverloadedError,
    ModelRateLimitError,
    ModelResponseError,
)
from runtime.models._gemini import (
    THOUGHT_SIGNATURE_SENTINEL,
    GeminiModel,
    GeminiStreamState,
    gemini_contents,
    gemini_request_body,
    gemini_response,
    needs_thought_signatures,
)
from runtime.models._openai import (
    OpenAIChatModel,
    OpenAIStreamState,
    openai_messages,
    openai_request_body,
    openai_response,
)

__all__ = [
    "AnthropicModel",
    "AnthropicStreamState",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_TOKENS",
    "GeminiModel",
    "GeminiStreamState",
    "MissingExtraError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConfigurationError",
    "ModelConnectionError",
    "ModelContextLengthError",
    "ModelError",
    "ModelOverloadedError",
    "ModelRateLimitError",
    "ModelResponseError",
    "NativeTool",
    "OpenAIChatModel",
    "OpenAIStreamState",
    "RAW_ARGUMENTS_KEY",
    "THOUGHT_SIGNATURE_SENTINEL",
    "anthropic_messages",
    "anthropic_request_body",
    "anthropic_response",
    "gemini_contents",
    "gemini_request_body",
    "gemini_response",
    "needs_thought_signatures",
    "openai_messages",
    "openai_request_body",
    "openai_response",
]
