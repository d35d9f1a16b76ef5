"""``OpenAIChatModel``: the Chat Completions API, on OpenAI or any compatible server.

Translation (pure, no SDK): ``openai_request_body`` turns a ``ModelRequest`` into the exact JSON
body of ``POST /chat/completions``; ``openai_response`` turns the reply into a ``ModelResponse``;
``OpenAIStreamState`` folds streamed chunks into the same response. Rules:

- instructions → one ``system`` message; user text → ``user`` messages; a model turn → one
  ``assistant`` message with its text and ``tool_calls`` (ids exactly as stored, arguments as
  JSON text); each function response → a ``tool`` message with that ``tool_call_id`` and the
  response as JSON text (errors included: the model reads the structured error);
- declarations → ``tools`` through ``to_openai``; a native tool is either ``{"web_search_options":
  {...}}`` (merged into the body, for the search models) or a ``tools`` entry of another type,
  sent as given;
- the reply's calls keep OpenAI's ids (a call without one gets a generated id, then that id is
  sent back); ``custom_metadata`` holds provider, model, response id, finish reason and usage.

The I/O shell (``OpenAIChatModel``) imports ``openai`` when built and maps its exceptions to
``ModelError``s in one place (``_map_error``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from eventstore import Content, FunctionCall
from runtime._model import ModelResponse
from runtime.declarations import to_openai
from runtime.models._base import (
    DEFAULT_MAX_RETRIES,
    artifact_placeholder,
    dump_arguments,
    dump_response,
    import_sdk,
    join_instructions,
    parse_arguments,
    resolve_api_key,
    unsupported_native_tool,
)
from runtime.models._errors import (
    ModelError,
    ModelResponseError,
    map_sdk_error,
)
from runtime.tools import ModelRequest

__all__ = [
    "OpenAIChatModel",
    "OpenAIStreamState",
    "openai_messages",
    "openai_request_body",
    "openai_response",
]

_PROVIDER = "openai"


def _content_messages(content: Content) -> list[dict[str, Any]]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    tool_messages: list[dict[str, Any]] = []
    for part in content.parts:
        if part.text is not None:
            texts.append(part.text)
        elif part.artifact is not None:
            texts.append(artifact_placeholder(part.artifact))
        elif part.function_call is not None:
            call = part.function_call
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": dump_arguments(call.args)},
                }
            )
        elif part.function_response is not None:
            answer = part.function_response
            tool_messages.append(
                {
                    "role": "tool",
                    "tool_call_id": answer.id,
                    "content": dump_response(answer.response),
                }
            )
    text = "\n".join(t for t in texts if t)
    if content.role == "model":
        if not text and not calls:
            return []
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return [message]
    # Tool messages must directly follow the assistant message that made the calls.
    return [*tool_messages, *([{"role": "user", "content": text}] if text else [])]


def openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Return the ``messages`` of a request: the system message, then one per content rule."""
    messages: list[dict[str, Any]] = []
    system = join_instructions(request.instructions)
    if system:
        messages.append({"role": "system", "content": system})
    for content in request.contents:
        messages.extend(_content_messages(content))
    return messages


def openai_request_body(
    request: ModelRequest, *, model: str, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return the JSON body of ``POST /chat/completions`` for ``request`` (a fresh dict).

    ``settings`` (``temperature``, ``max_completion_tokens`` …) are added to the body as given.
    Raises ``ToolDefinitionError`` for a native tool Chat Completions cannot take.
    """
    body: dict[str, Any] = {"model": model, "messages": openai_messages(request)}
    tools = [to_openai(declaration) for declaration in request.declarations]
    for native in request.native_tools:
        if set(native) == {"web_search_options"}:
            body["web_search_options"] = native["web_search_options"]
        elif isinstance(native.get("type"), str):
            tools.append(dict(native))
        else:
            raise unsupported_native_tool(
                "OpenAIChatModel",
                native,
                '{"web_search_options": {...}} or a tools entry with a "type"',
            )
    if tools:
        body["tools"] = tools
    body.update(settings or {})
    return body


def _metadata(reply: Mapping[str, Any], finish_reason: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"provider": _PROVIDER}
    for key, name in (("model", "model"), ("id", "response_id")):
        if reply.get(key):
            metadata[name] = reply[key]
    if finish_reason:
        metadata["finish_reason"] = finish_reason
    usage = reply.get("usage")
    if isinstance(usage, Mapping):
        metadata["usage"] = {k: v for k, v in usage.items() if isinstance(v, int)}
    return metadata


def openai_response(reply: Mapping[str, Any]) -> ModelResponse:
    """Return the ``ModelResponse`` of a chat completion (its first choice).

    Raises ``ModelResponseError`` when the reply has no choice.
    """
    choices = reply.get("choices") or []
    if not choices:
        raise ModelResponseError(
            "The chat completion has no choices.",
            provider=_PROVIDER,
            model=str(reply.get("model", "")),
        )
    choice = choices[0]
    message = choice.get("message") or {}
    calls = tuple(
        FunctionCall(
            id=call.get("id") or "",
            name=call["function"]["name"],
            args=parse_arguments(call["function"].get("arguments")),
        )
        for call in message.get("tool_calls") or ()
    )
    return ModelResponse(
        text=message.get("content") or "",
        function_calls=calls,
        custom_metadata=_metadata(reply, choice.get("finish_reason")),
    )


class OpenAIStreamState:
    """Sans-IO: folds streamed chat-completion chunks into the turn's ``ModelResponse``.

    ``feed`` returns the text each chunk adds (possibly ``""``); tool calls arrive in fragments
    keyed by index and are joined; ``response()`` is the same response ``openai_response`` would
    give for the whole reply.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: Any = None
        self._reply: dict[str, Any] = {}

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """Take the next chunk; return the text it adds."""
        for key in ("id", "model"):
            if chunk.get(key):
                self._reply[key] = chunk[key]
        if isinstance(chunk.get("usage"), Mapping):
            self._reply["usage"] = chunk["usage"]
        added = ""
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            added = delta.get("content") or ""
            if added:
                self._text.append(added)
            for fragment in delta.get("tool_calls") or ():
                call = self._calls.setdefault(
                    int(fragment.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                function = fragment.get("function") or {}
                call["id"] = fragment.get("id") or call["id"]
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return added

    def response(self) -> ModelResponse:
        """Return the whole turn. Raises ``ModelResponseError`` when no chunk ended the turn."""
        if self._finish is None:
            raise ModelResponseError(
                "The chat completion stream ended before a finish_reason.",
                provider=_PROVIDER,
                model=str(self._reply.get("model", "")),
            )
        calls = tuple(
            FunctionCall(id=c["id"], name=c["name"], args=parse_arguments(c["arguments"]))
            for _, c in sorted(self._calls.items())
        )
        return ModelResponse(
            text="".join(self._text),
            function_calls=calls,
            custom_metadata=_metadata(self._reply, self._finish),
        )


def _says_context_length(exc: Exception, message: str) -> bool:
    return getattr(exc, "code", None) == "context_length_exceeded" or (
        "maximum context length" in message
    )


class OpenAIChatModel:
    """A ``Model`` (and ``StreamingModel``) on the Chat Completions API of the ``openai`` SDK.

    ``base_url`` points it at any OpenAI-compatible server (vLLM, Ollama, a LiteLLM proxy …);
    pass ``client=`` for a pre-built ``openai.AsyncOpenAI`` (e.g. ``AsyncAzureOpenAI``). The API
    key is ``api_key`` or ``OPENAI_API_KEY`` (optional with a ``base_url``: local servers take
    none). Transient failures (429, 5xx, connection) are retried ``max_retries`` times with the
    SDK's backoff, which honours ``retry-after``. Raises ``MissingExtraError`` without the
    ``openai`` extra, ``ModelConfigurationError`` without a key; ``generate`` raises
    ``ModelError`` subclasses and never an SDK exception.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = 120.0,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._sdk = import_sdk("openai", extra="openai", adapter="OpenAIChatModel")
        self.model = model
        """The model name sent in every request."""
        self.settings = dict(settings or {})
        """Extra body fields (``temperature`` …) sent with every request."""
        if client is None:
            key = resolve_api_key(
                api_key,
                env_var="OPENAI_API_KEY",
                adapter="OpenAIChatModel",
                required=base_url is None,
            )
            client = self._sdk.AsyncOpenAI(
                # Local servers accept any key; the SDK insists on one.
                api_key=key or "not-needed",
                base_url=base_url,
                max_retries=max_retries,
                timeout=timeout,
            )
        self._client = client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next turn; raises a ``ModelError`` when the call fails."""
        body = openai_request_body(request, model=self.model, settings=self.settings)
        try:
            completion = await self._client.chat.completions.create(**body)
        except self._sdk.OpenAIError as exc:
            raise self._map_error(exc) from exc
        return openai_response(completion.model_dump(mode="json"))

    async def generate_stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas as they arrive, then the whole turn as a ``ModelResponse``."""
        body = openai_request_body(request, model=self.model, settings=self.settings)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        state = OpenAIStreamState()
        try:
            stream = await self._client.chat.completions.create(**body)
            async with stream:
                async for chunk in stream:
                    added = state.feed(chunk.model_dump(mode="json"))
                    if added:
                        yield added
        except self._sdk.OpenAIError as exc:
            raise self._map_error(exc) from exc
        yield state.response()

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    def _map_error(self, exc: Exception) -> ModelError:
        return map_sdk_error(exc, sdk=self._sdk, provider=_PROVIDER, model=self.model,
                             context_length=_says_context_length)

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model!r})"
