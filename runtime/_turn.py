"""One model turn as the log records it (docs/protocol.md §2): the model's answer, streamed or
not, becomes one event under call ids unique in the session, its long-running calls marked.

Models may reuse ids (``call_0`` every turn) and the log keys on them (``runtime._call_ids``):
``turn_event`` stores a reused id under a fresh one and records the provider's in the event's
metadata, so requests send the model its own ids back. ``stream_turn`` yields the turn's text
as partial events (never stored) while the model streams it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from eventstore import Content, Event, Part
from runtime._call_ids import PROVIDER_CALL_IDS_KEY, session_call_ids, unique_call_ids
from runtime._exceptions import RuntimeUsageError
from runtime._invocation import InvocationContext
from runtime._model import ModelResponse, StreamingModel
from runtime.tools import ModelRequest

__all__ = ["stream_turn", "turn_event"]


async def turn_event(
    ctx: InvocationContext, request: ModelRequest, response: ModelResponse
) -> tuple[ModelResponse, Event]:
    """The event to append for ``response`` to ``request`` (not appended), and the response
    under the ids the event stores (a reused id replaced by a fresh ``call-<uuid hex>``)."""
    compaction, recent = await ctx.request_events()
    # After a compaction the ids used before it are not read: every call gets a fresh id then
    # (the model still sees its own), so ids stay unique in the whole log.
    response, replaced = unique_call_ids(response, session_call_ids(recent),
                                         fresh_ids=compaction is not None)
    metadata = dict(response.custom_metadata)
    if replaced:
        # A replayed turn (RecordedModel) brings the entries its recording made.
        recorded = metadata.get(PROVIDER_CALL_IDS_KEY)
        earlier = dict(recorded) if isinstance(recorded, Mapping) else {}
        metadata[PROVIDER_CALL_IDS_KEY] = {**earlier, **replaced}
    long_running = tuple(
        call.id
        for call in response.function_calls
        if (tool := request.tools_by_name.get(call.name)) is not None and tool.is_long_running
    )
    event = ctx.new_event(
        content=response.content(),
        long_running_tool_ids=long_running,
        turn_complete=True,
        custom_metadata=metadata,
    )
    return response, event


async def stream_turn(
    ctx: InvocationContext,
    model: StreamingModel,
    request: ModelRequest,
    streamed: list[ModelResponse],
) -> AsyncIterator[Event]:
    """Yield a partial event per text delta of ``model``'s stream; put its response in
    ``streamed``. Raises ``RuntimeUsageError`` unless the stream ends with exactly one response."""
    stream = model.generate_stream(request)
    try:
        async for item in stream:
            if isinstance(item, ModelResponse):
                streamed.append(item)
            elif item:
                yield ctx.new_event(
                    content=Content(role="model", parts=(Part(text=item),)), partial=True
                )
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    if len(streamed) != 1:
        raise RuntimeUsageError(
            f"The stream of model {model!r} gave {len(streamed)} ModelResponse(s); "
            f"generate_stream must end with exactly one."
        )
