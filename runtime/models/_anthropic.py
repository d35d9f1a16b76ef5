"""``AnthropicModel``: Claude through the Messages API of the ``anthropic`` SDK.

Translation (pure, no SDK): ``anthropic_request_body`` turns a ``ModelRequest`` into the exact JSON
body of ``POST /v1/messages``; ``anthropic_response`` turns the reply into a ``ModelResponse``;
``AnthropicStreamState`` folds the streamed events into the same response. Rules:

- instructions → ``system``; user text → ``text`` blocks of a ``user`` message; a model turn →
  an ``assistant`` message of ``text`` and ``tool_use`` blocks (ids exactly as stored); function
  responses → ``tool_result`` blocks with their ``tool_use_id``, the response as JSON text and
  ``is_error`` for the runtime's structured errors; consecutive messages of one role are merged
  into one message (``tool_result`` blocks first, as the API requires); empty text is dropped;
- declarations → ``tools`` through ``to_anthropic``; a native tool is a server tool entry with a
  ``type`` and a ``name`` (e.g. ``{"type": "web_search_20250305", "name": "web_search"}``), sent
  as given;
- the reply's ``tool_use`` ids are kept; ``custom_metadata`` holds provider, model, message id,
  stop reason and usage. Server-tool blocks and thinking are not part of the stored turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from eventstore import Content, FunctionCall
from runtime._model import ModelResponse
from runtime.declarations import to_anthropic
from runtime.models._base import (
    DEFAULT_MAX_RETRIES,
    artifact_placeholder,
    dump_response,
    import_sdk,
    is_error_response,
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
    "DEFAULT_MAX_TOKENS",
    "AnthropicModel",
    "AnthropicStreamState",
    "anthropic_messages",
    "anthropic_request_body",
    "anthropic_response",
]

_PROVIDER = "anthropic"

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` of every request unless the settings say otherwise (the API requires one)."""

_CONTEXT_WORDS = ("prompt is too long", "context limit", "context window")


def _blocks(content: Content) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for part in content.parts:
        if part.text:
            others.append({"type": "text", "text": part.text})
        elif part.artifact is not None:
            others.append({"type": "text", "text": artifact_placeholder(part.artifact)})
        elif part.function_call is not None:
            call = part.function_call
            others.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.args)}
            )
        elif part.function_response is not None:
            answer = part.function_response
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": answer.id,
                "content": dump_response(answer.response),
            }
            if is_error_response(answer.response):
                block["is_error"] = True
            results.append(block)
    return [*results, *others]


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Return the ``messages`` of a request (roles alternate; see the module rules)."""
    messages: list[dict[str, Any]] = []
    for content in request.contents:
        blocks = _blocks(content)
        if not blocks:
            continue
        role = "assistant" if content.role == "model" else "user"
        if messages and messages[-1]["role"] == role:
            merged = messages[-1]["content"] + blocks
            # tool_result blocks lead a user message, whatever content they were merged with.
            merged.sort(key=lambda b: b["type"] != "tool_result")
            messages[-1]["content"] = merged
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def anthropic_request_body(
    request: ModelRequest, *, model: str, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return the JSON body of ``POST /v1/messages`` for ``request`` (a fresh dict).

    ``settings`` (``max_tokens``, ``temperature`` …) are added as given. Raises
    ``ToolDefinitionError`` for a native tool that is not a server tool entry.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS}
    system = join_instructions(request.instructions)
    if system:
        body["system"] = system
    body["messages"] = anthropic_messages(request)
    tools = [to_anthropic(declaration) for declaration in request.declarations]
    for native in request.native_tools:
        if not (isinstance(native.get("type"), str) and isinstance(native.get("name"), str)):
            raise unsupported_native_tool(
                "AnthropicModel", native, 'a server tool entry with a "type" and a "name"'
            )
        tools.append(dict(native))
    if tools:
        body["tools"] = tools
    body.update(settings or {})
    return body


def _metadata(message: Mapping[str, Any], usage: Mapping[str, Any] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"provider": _PROVIDER}
    for key, name in (("model", "model"), ("id", "response_id"), ("stop_reason", "finish_reason")):
        if message.get(key):
            metadata[name] = message[key]
    if isinstance(usage, Mapping):
        metadata["usage"] = {k: v for k, v in usage.items() if isinstance(v, int)}
    return metadata


def anthropic_response(reply: Mapping[str, Any]) -> ModelResponse:
    """Return the ``ModelResponse`` of a Messages API reply (text blocks joined, tool uses in
    order)."""
    texts: list[str] = []
    calls: list[FunctionCall] = []
    for block in reply.get("content") or ():
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(
                FunctionCall(
                    id=block.get("id") or "", name=block["name"], args=block.get("input") or {}
                )
            )
    return ModelResponse(
        text="".join(texts),
        function_calls=tuple(calls),
        custom_metadata=_metadata(reply, reply.get("usage")),
    )


class AnthropicStreamState:
    """Sans-IO: folds the Messages API's stream events into the turn's ``ModelResponse``.

    ``feed`` returns the text an event adds (possibly ``""``); ``tool_use`` input arrives as JSON
    fragments and is parsed when its block ends; ``response()`` equals what
    ``anthropic_response`` gives for the whole message.
    """

    def __init__(self) -> None:
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._stopped = False

    def feed(self, event: Mapping[str, Any]) -> str:
        """Take the next stream event; return the text it adds."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self._message.update({k: message[k] for k in ("id", "model") if message.get(k)})
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            self._blocks[int(event["index"])] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            index = int(event["index"])
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text = str(delta.get("text") or "")
                block = self._blocks.setdefault(index, {"type": "text", "text": ""})
                block["text"] = (block.get("text") or "") + text
                return text
            if delta.get("type") == "input_json_delta":
                self._json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "content_block_stop":
            index = int(event["index"])
            if index in self._json:
                self._blocks[index]["input"] = parse_arguments("".join(self._json.pop(index)))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self._message["stop_reason"] = delta["stop_reason"]
            self._usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
        elif kind == "message_stop":
            self._stopped = True
        return ""

    def response(self) -> ModelResponse:
        """Return the whole turn. Raises ``ModelResponseError`` when the stream did not stop."""
        if not self._stopped:
            raise ModelResponseError(
                "The Messages API stream ended before message_stop.",
                provider=_PROVIDER,
                model=str(self._message.get("model", "")),
            )
        reply = {**self._message, "content": [b for _, b in sorted(self._blocks.items())]}
        reply["usage"] = self._usage
        return anthropic_response(reply)


def _says_context_length(_exc: Exception, message: str) -> bool:
    return any(words in message.lower() for words in _CONTEXT_WORDS)


class AnthropicModel:
    """A ``Model`` (and ``StreamingModel``) on the Messages API of the ``anthropic`` SDK.

    The API key is ``api_key`` or ``ANTHROPIC_API_KEY``; ``base_url`` points it at a proxy or a
    compatible server; ``client=`` takes a pre-built ``anthropic.AsyncAnthropic``. Transient
    failures (429, 5xx, 529 overloaded, connection) are retried ``max_retries`` times with the
    SDK's backoff, which honours ``retry-after``. Raises ``MissingExtraError`` without the
    ``anthropic`` extra and ``ModelConfigurationError`` without a key; ``generate`` raises
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
        self._sdk = import_sdk("anthropic", extra="anthropic", adapter="AnthropicModel")
        self.model = model
        """The model name sent in every request."""
        self.settings = dict(settings or {})
        """Extra body fields (``max_tokens``, ``temperature`` …) sent with every request."""
        if client is None:
            key = resolve_api_key(api_key, env_var="ANTHROPIC_API_KEY", adapter="AnthropicModel")
            client = self._sdk.AsyncAnthropic(
                api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout
            )
        self._client = client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next turn; raises a ``ModelError`` when the call fails."""
        body = anthropic_request_body(request, model=self.model, settings=self.settings)
        try:
            message = await self._client.messages.create(**body)
        except self._sdk.AnthropicError as exc:
            raise self._map_error(exc) from exc
        return anthropic_response(message.model_dump(mode="json"))

    async def generate_stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas as they arrive, then the whole turn as a ``ModelResponse``."""
        body = anthropic_request_body(request, model=self.model, settings=self.settings)
        body["stream"] = True
        state = AnthropicStreamState()
        try:
            stream = await self._client.messages.create(**body)
            async with stream:
                async for event in stream:
                    added = state.feed(event.model_dump(mode="json"))
                    if added:
                        yield added
        except self._sdk.AnthropicError as exc:
            raise self._map_error(exc) from exc
        yield state.response()

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    def _map_error(self, exc: Exception) -> ModelError:
        return map_sdk_error(exc, sdk=self._sdk, provider=_PROVIDER, model=self.model,
                             context_length=_says_context_length)

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"
