"""``GeminiModel``: Gemini through ``generateContent`` of the ``google-genai`` SDK.

Translation (pure, no SDK): ``gemini_request_body`` turns a ``ModelRequest`` into the JSON body of
``POST /v1beta/models/{model}:generateContent`` (camelCase, as on the wire);
``gemini_response`` turns a reply of that API into a ``ModelResponse``; ``GeminiStreamState``
folds streamed replies into the same response. Rules:

- instructions → ``systemInstruction``; contents keep their roles (``user``/``model``) and parts:
  ``text``, ``functionCall`` and ``functionResponse``, each with its id exactly as stored (an id
  Gemini did not give was generated when the turn was stored and is sent back as such);
- declarations → one ``tools`` entry of ``functionDeclarations`` through ``to_gemini``; a native
  tool is a ``tools`` entry of a Gemini tool such as ``{"googleSearch": {}}`` or
  ``{"codeExecution": {}}``, sent as given; ``settings`` go to ``generationConfig``;
- thought parts are not part of the stored turn; ``custom_metadata`` holds provider, model
  version, response id, finish reason and usage;
- Gemini 3 and later refuse a replayed ``functionCall`` part without the ``thoughtSignature`` it
  came with. The log does not keep those opaque signatures, so for these models every replayed
  call carries Google's documented sentinel ``skip_thought_signature_validator`` instead
  (``thought_signature_sentinel=True``; ``GeminiModel`` sets it from the model name).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from eventstore import Content, FunctionCall
from runtime._model import ModelResponse
from runtime.declarations import to_gemini
from runtime.models._base import (
    DEFAULT_MAX_RETRIES,
    artifact_placeholder,
    import_sdk,
    join_instructions,
    resolve_api_key,
    unsupported_native_tool,
)
from runtime.models._errors import (
    ModelConfigurationError,
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    map_status_error,
    parse_retry_after,
)
from runtime.tools import ModelRequest

__all__ = [
    "GeminiModel",
    "GeminiStreamState",
    "THOUGHT_SIGNATURE_SENTINEL",
    "gemini_contents",
    "gemini_request_body",
    "gemini_response",
    "needs_thought_signatures",
]

_PROVIDER = "gemini"

THOUGHT_SIGNATURE_SENTINEL: Final = "skip_thought_signature_validator"
"""What a replayed call carries in place of the thought signature the log did not keep."""

_MAJOR = re.compile(r"gemini-(\d+)")
_CONTEXT_WORDS = ("exceeds the maximum number of tokens", "input token count", "context window")
_NATIVE_TOOLS = frozenset(
    {
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "google_search_retrieval",
        "codeExecution",
        "code_execution",
        "urlContext",
        "url_context",
        "googleMaps",
        "google_maps",
        "fileSearch",
        "file_search",
        "enterpriseWebSearch",
        "enterprise_web_search",
        "retrieval",
        "computerUse",
        "computer_use",
    }
)


def _parts(content: Content, *, sentinel: bool = False) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in content.parts:
        if part.text:
            parts.append({"text": part.text})
        elif part.artifact is not None:
            parts.append({"text": artifact_placeholder(part.artifact)})
        elif part.function_call is not None:
            call = part.function_call
            replayed: dict[str, Any] = {
                "functionCall": {"id": call.id, "name": call.name, "args": dict(call.args)}
            }
            if sentinel:
                replayed["thoughtSignature"] = THOUGHT_SIGNATURE_SENTINEL
            parts.append(replayed)
        elif part.function_response is not None:
            answer = part.function_response
            parts.append(
                {
                    "functionResponse": {
                        "id": answer.id,
                        "name": answer.name,
                        "response": dict(answer.response),
                    }
                }
            )
    return parts


def gemini_contents(
    request: ModelRequest, *, thought_signature_sentinel: bool = False
) -> list[dict[str, Any]]:
    """Return the ``contents`` of a request (contents without a sendable part are left out)."""
    contents: list[dict[str, Any]] = []
    for content in request.contents:
        parts = _parts(content, sentinel=thought_signature_sentinel)
        if parts:
            contents.append({"role": content.role, "parts": parts})
    return contents


def needs_thought_signatures(model: str) -> bool:
    """True for models (Gemini 3 and later) that refuse replayed calls without a signature."""
    found = _MAJOR.search(model)
    return found is not None and int(found.group(1)) >= 3


def gemini_request_body(
    request: ModelRequest,
    *,
    settings: Mapping[str, Any] | None = None,
    thought_signature_sentinel: bool = False,
) -> dict[str, Any]:
    """Return the JSON body of ``generateContent`` for ``request`` (a fresh dict).

    ``settings`` (``temperature``, ``maxOutputTokens`` …) become ``generationConfig``. Raises
    ``ToolDefinitionError`` for a native tool that is not a Gemini tool entry.
    """
    body: dict[str, Any] = {
        "contents": gemini_contents(request, thought_signature_sentinel=thought_signature_sentinel)
    }
    system = join_instructions(request.instructions)
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    tools: list[dict[str, Any]] = []
    if request.declarations:
        tools.append({"functionDeclarations": [to_gemini(d) for d in request.declarations]})
    for native in request.native_tools:
        if not native or not set(native) <= _NATIVE_TOOLS:
            raise unsupported_native_tool(
                "GeminiModel", native, 'a Gemini tool entry such as {"googleSearch": {}}'
            )
        tools.append(dict(native))
    if tools:
        body["tools"] = tools
    if settings:
        body["generationConfig"] = dict(settings)
    return body


def _metadata(reply: Mapping[str, Any], finish_reason: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"provider": _PROVIDER}
    for key, name in (("modelVersion", "model"), ("responseId", "response_id")):
        if reply.get(key):
            metadata[name] = reply[key]
    if finish_reason:
        metadata["finish_reason"] = finish_reason
    usage = reply.get("usageMetadata")
    if isinstance(usage, Mapping):
        metadata["usage"] = {k: v for k, v in usage.items() if isinstance(v, int)}
    return metadata


def _blocked(reply: Mapping[str, Any]) -> ModelResponseError:
    feedback = reply.get("promptFeedback") or {}
    reason = feedback.get("blockReason") or "no reason given"
    return ModelResponseError(
        f"Gemini returned no candidate (prompt feedback: {reason}).",
        provider=_PROVIDER,
        model=str(reply.get("modelVersion", "")),
    )


def _split(parts: Any) -> tuple[list[str], list[FunctionCall]]:
    texts: list[str] = []
    calls: list[FunctionCall] = []
    for part in parts or ():
        if part.get("thought"):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), Mapping):
            call = part["functionCall"]
            calls.append(
                FunctionCall(
                    id=call.get("id") or "", name=call["name"], args=call.get("args") or {}
                )
            )
    return texts, calls


def gemini_response(reply: Mapping[str, Any]) -> ModelResponse:
    """Return the ``ModelResponse`` of a ``generateContent`` reply (its first candidate).

    Raises ``ModelResponseError`` when there is no candidate (a blocked prompt).
    """
    candidates = reply.get("candidates") or []
    if not candidates:
        raise _blocked(reply)
    candidate = candidates[0]
    texts, calls = _split((candidate.get("content") or {}).get("parts"))
    return ModelResponse(
        text="".join(texts),
        function_calls=tuple(calls),
        custom_metadata=_metadata(reply, candidate.get("finishReason")),
    )


class GeminiStreamState:
    """Sans-IO: folds the replies of ``streamGenerateContent`` into the turn's ``ModelResponse``.

    ``feed`` returns the text a reply adds; function calls arrive whole and are kept in order;
    ``response()`` equals what ``gemini_response`` gives for the joined reply.
    """

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._calls: list[FunctionCall] = []
        self._finish: Any = None
        self._reply: dict[str, Any] = {}
        self._seen_candidate = False

    def feed(self, reply: Mapping[str, Any]) -> str:
        """Take the next streamed reply; return the text it adds."""
        for key in ("modelVersion", "responseId", "usageMetadata", "promptFeedback"):
            if reply.get(key):
                self._reply[key] = reply[key]
        candidates = reply.get("candidates") or []
        if not candidates:
            return ""
        self._seen_candidate = True
        candidate = candidates[0]
        texts, calls = _split((candidate.get("content") or {}).get("parts"))
        self._texts.extend(texts)
        self._calls.extend(calls)
        if candidate.get("finishReason"):
            self._finish = candidate["finishReason"]
        return "".join(texts)

    def response(self) -> ModelResponse:
        """Return the whole turn; raises ``ModelResponseError`` when no candidate arrived."""
        if not self._seen_candidate:
            raise _blocked(self._reply)
        return ModelResponse(
            text="".join(self._texts),
            function_calls=tuple(self._calls),
            custom_metadata=_metadata(self._reply, self._finish),
        )


def _error_details(body: Any) -> list[Mapping[str, Any]]:
    error = body.get("error", body) if isinstance(body, Mapping) else None
    found = error.get("details") if isinstance(error, Mapping) else None
    return [d for d in found if isinstance(d, Mapping)] if isinstance(found, list) else []


def _retry_delay(details: list[Mapping[str, Any]]) -> float | None:
    """Return ``google.rpc.RetryInfo``'s ``retryDelay`` (``"7s"``) in seconds, if given."""
    for detail in details:
        delay = detail.get("retryDelay")
        if isinstance(delay, str) and delay.endswith("s"):
            return parse_retry_after(delay[:-1])
    return None


def _sdk_arguments(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Split a wire body into the SDK's ``contents`` and ``config`` (which it re-assembles)."""
    config: dict[str, Any] = dict(body.get("generationConfig") or {})
    # The loop runs the tools; the SDK's own function calling must never run anything.
    config["automatic_function_calling"] = {"disable": True}
    if "systemInstruction" in body:
        config["systemInstruction"] = body["systemInstruction"]
    if "tools" in body:
        config["tools"] = body["tools"]
    return list(body["contents"]), config


class GeminiModel:
    """A ``Model`` (and ``StreamingModel``) on the Gemini API of the ``google-genai`` SDK.

    The API key is ``api_key``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; ``base_url`` points it
    at a proxy; ``client=`` takes a pre-built ``google.genai.Client`` (e.g. for Vertex AI).
    Transient failures (408, 429, 5xx, connection) are retried ``max_retries`` times with the
    SDK's exponential backoff (``retry_options`` tunes it: ``initial_delay``, ``max_delay`` …).
    Raises ``MissingExtraError`` without the ``gemini`` extra and ``ModelConfigurationError``
    without a key; ``generate`` raises ``ModelError`` subclasses and never an SDK exception.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_options: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        genai = import_sdk("google.genai", extra="gemini", adapter="GeminiModel")
        self._errors = import_sdk("google.genai.errors", extra="gemini", adapter="GeminiModel")
        self.model = model
        """The model name of every request."""
        self.settings = dict(settings or {})
        """``generationConfig`` fields sent with every request."""
        if client is None:
            key = resolve_api_key(
                api_key, env_var="GEMINI_API_KEY", adapter="GeminiModel", required=False
            ) or resolve_api_key(
                None, env_var="GOOGLE_API_KEY", adapter="GeminiModel", required=False
            )
            if key is None:
                raise ModelConfigurationError(
                    "GeminiModel needs an API key: set the GEMINI_API_KEY environment variable "
                    "(or GOOGLE_API_KEY, or pass api_key=...).",
                    env_var="GEMINI_API_KEY",
                )
            types = genai.types
            client = genai.Client(
                api_key=key,
                http_options=types.HttpOptions(
                    base_url=base_url,
                    timeout=int(timeout * 1000),
                    retry_options=types.HttpRetryOptions(
                        attempts=max_retries + 1, **dict(retry_options or {})
                    ),
                ),
            )
        self._client = client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next turn; raises a ``ModelError`` when the call fails."""
        contents, config = _sdk_arguments(
            gemini_request_body(
                request,
                settings=self.settings,
                thought_signature_sentinel=needs_thought_signatures(self.model),
            )
        )
        try:
            reply = await self._client.aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except Exception as exc:
            raise self._map_error(exc) from exc
        return gemini_response(reply.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def generate_stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas as they arrive, then the whole turn as a ``ModelResponse``."""
        contents, config = _sdk_arguments(
            gemini_request_body(
                request,
                settings=self.settings,
                thought_signature_sentinel=needs_thought_signatures(self.model),
            )
        )
        state = GeminiStreamState()
        try:
            stream = await self._client.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=config
            )
            try:
                async for reply in stream:
                    added = state.feed(
                        reply.model_dump(mode="json", by_alias=True, exclude_none=True)
                    )
                    if added:
                        yield added
            finally:
                await stream.aclose()
        except Exception as exc:
            raise self._map_error(exc) from exc
        yield state.response()

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.aio.aclose()

    def _map_error(self, exc: Exception) -> ModelError:
        if isinstance(exc, ModelError):
            return exc
        if isinstance(exc, self._errors.APIError):
            message = str(exc.message or exc)
            details = _error_details(exc.details)
            status = int(exc.code)
            if any(d.get("reason") == "API_KEY_INVALID" for d in details):
                status = 401  # Gemini answers a bad key with 400 INVALID_ARGUMENT
            headers = getattr(exc.response, "headers", None) or {}
            return map_status_error(
                provider=_PROVIDER,
                model=self.model,
                status_code=status,
                message=message,
                retry_after=_retry_delay(details) or parse_retry_after(headers.get("retry-after")),
                context_length=any(words in message.lower() for words in _CONTEXT_WORDS),
            )
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "aiohttp"):
            return ModelConnectionError(
                f"gemini model {self.model!r} could not be reached: {exc!r}",
                provider=_PROVIDER,
                model=self.model,
            )
        return ModelResponseError(
            f"gemini model {self.model!r} failed: {exc!r}", provider=_PROVIDER, model=self.model
        )

    def __repr__(self) -> str:
        return f"GeminiModel({self.model!r})"
