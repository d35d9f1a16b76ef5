"""Errors of model adapters: one typed error per way a provider call can fail.

The tree (under ``runtime.AgentRuntimeError``)::

    ModelError                       a model call failed; nothing was appended to the log
    ├── ModelAuthenticationError     401/403: the key is missing, wrong or not allowed
    ├── ModelRateLimitError          429 after the SDK's retries; ``retry_after`` when given
    ├── ModelOverloadedError         5xx/529 after the SDK's retries (the provider is busy or down)
    ├── ModelBadRequestError         another 4xx: the provider refused the request as sent
    │   └── ModelContextLengthError  the conversation is longer than the model's context
    ├── ModelConnectionError         no HTTP answer (network, timeout)
    └── ModelResponseError           an answer that cannot become a ``ModelResponse``

    MissingExtraError                an adapter used without its optional extra installed
                                     (a ``RuntimeUsageError`` and an ``ImportError``)
    ModelConfigurationError          an adapter built without what it needs (an API key)

Every adapter translates its SDK's exceptions in exactly one place (``map_status_error`` here
decides the class from the HTTP status and the provider's words), so no SDK exception escapes a
``generate`` call untranslated; the SDK exception stays reachable as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType

from runtime._exceptions import AgentRuntimeError, RuntimeUsageError

__all__ = [
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
    "map_sdk_error",
    "map_status_error",
]


class ModelError(AgentRuntimeError):
    """A model call failed after the SDK's own retries; the loop appended nothing for it.

    ``provider`` (``openai``, ``anthropic``, ``gemini``), ``model`` and ``status_code`` (``None``
    without an HTTP answer) say which call failed; the message quotes the provider's words.
    """

    def __init__(
        self, message: str, *, provider: str, model: str, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status_code = status_code


class ModelAuthenticationError(ModelError):
    """The provider refused the credentials (HTTP 401 or 403)."""


class ModelRateLimitError(ModelError):
    """The provider rate-limited the call (HTTP 429) and the retries were used up.

    ``retry_after`` is the provider's ``retry-after`` in seconds, ``None`` when it gave none.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status_code: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, model=model, status_code=status_code)
        self.retry_after = retry_after


class ModelOverloadedError(ModelError):
    """The provider failed or was overloaded (HTTP 5xx, Anthropic's 529) after the retries."""


class ModelBadRequestError(ModelError):
    """The provider refused the request as sent (a 4xx other than 401/403/429)."""


class ModelContextLengthError(ModelBadRequestError):
    """The request is longer than the model's context window (shorten the history)."""


class ModelConnectionError(ModelError):
    """No HTTP answer: the connection failed or timed out after the retries."""


class ModelResponseError(ModelError):
    """The provider answered, but the answer cannot become a ``ModelResponse`` (e.g. no
    candidate, or a stream that ended before its final event)."""


class MissingExtraError(RuntimeUsageError, ImportError):
    """A model adapter was used without its SDK; ``extra`` names what to install."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class ModelConfigurationError(RuntimeUsageError):
    """An adapter cannot be built as given; ``env_var`` names the variable that would fix it
    when the problem is a missing API key."""

    def __init__(self, message: str, *, env_var: str | None = None) -> None:
        super().__init__(message)
        self.env_var = env_var


def map_status_error(
    *,
    provider: str,
    model: str,
    status_code: int,
    message: str,
    retry_after: float | None = None,
    context_length: bool = False,
) -> ModelError:
    """Return the typed error for an HTTP error answer of ``provider``.

    ``context_length`` is the adapter's reading of the provider's words (each provider says it
    differently); the status decides everything else.
    """
    text = f"{provider} model {model!r} failed with HTTP {status_code}: {message}"
    if status_code in (401, 403):
        return ModelAuthenticationError(
            text, provider=provider, model=model, status_code=status_code
        )
    if status_code == 429:
        return ModelRateLimitError(
            text, provider=provider, model=model, status_code=status_code, retry_after=retry_after
        )
    if status_code >= 500:
        return ModelOverloadedError(text, provider=provider, model=model, status_code=status_code)
    if context_length:
        return ModelContextLengthError(
            text, provider=provider, model=model, status_code=status_code
        )
    return ModelBadRequestError(text, provider=provider, model=model, status_code=status_code)


def parse_retry_after(value: str | None) -> float | None:
    """Return a ``retry-after`` header in seconds (``None`` when absent or an HTTP date)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _provider_message(body: object, fallback: str) -> str:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return fallback


def map_sdk_error(
    exc: Exception,
    *,
    sdk: ModuleType,
    provider: str,
    model: str,
    context_length: Callable[[Exception, str], bool],
) -> ModelError:
    """Return the typed error for an exception of the ``openai`` or ``anthropic`` SDK (both have
    ``APIStatusError`` with ``status_code``/``body``/``response`` and ``APIConnectionError``).

    ``context_length(exc, message)`` is the adapter's reading of the provider's words.
    """
    if isinstance(exc, sdk.APIStatusError):
        message = _provider_message(exc.body, str(exc))
        return map_status_error(
            provider=provider,
            model=model,
            status_code=exc.status_code,
            message=message,
            retry_after=parse_retry_after(exc.response.headers.get("retry-after")),
            context_length=context_length(exc, message),
        )
    if isinstance(exc, sdk.APIConnectionError):
        return ModelConnectionError(
            f"{provider} model {model!r} could not be reached: {exc}",
            provider=provider,
            model=model,
        )
    return ModelResponseError(f"{provider} model {model!r} failed: {exc}", provider=provider,
                              model=model)
