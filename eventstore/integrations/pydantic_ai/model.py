"""The durable model: each model request of a run is recorded before it is sent (with every
message before it that is not in the log yet), and so each response is recorded before the next
request; the durable toolset records it before any tool acts on it, and the agent at the end of
the run (docs/protocol.md §2). A response is recorded as the run keeps it, stamped with the
run's ids, which pydantic-ai adds after the model returns.

A resumed run never asks the model for a response the log holds: the conversation it continues
is read from the log, so recorded responses are history, not requests. A response that arrived
but was not recorded (a crash in between) is asked for again: no one acted on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from .toolset import CURRENT_JOURNAL

__all__ = ["EventStoreModel"]


class EventStoreModel(WrapperModel):
    """A model whose requests and responses are appended to the run's session as they happen
    (outside an ``EventStoreAgent`` run it is the wrapped model, unchanged)."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        journal = CURRENT_JOURNAL.get()
        if journal is None:
            return await super().request(messages, model_settings, model_request_parameters)
        _note_output_tools(journal.tool_kinds, model_request_parameters)
        await journal.record_messages(messages)
        response = await super().request(messages, model_settings, model_request_parameters)
        journal.model_requests += 1
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        journal = CURRENT_JOURNAL.get()
        if journal is None:
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                yield streamed
            return
        _note_output_tools(journal.tool_kinds, model_request_parameters)
        await journal.record_messages(messages)
        async with super().request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as streamed:
            journal.model_requests += 1
            yield streamed


def _note_output_tools(kinds: dict[str, str], parameters: ModelRequestParameters) -> None:
    for tool in parameters.output_tools:
        kinds[tool.name] = "output"
