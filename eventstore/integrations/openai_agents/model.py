"""The durable run's handle and model for ``EventStoreRunner`` (``runner``): ``_RunRef`` names
the run the wrappers record in, ``DurableModel`` records each model response in it before the
SDK acts on it and returns a recorded one without a request."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from agents import Model, RunConfig

from .durable import DurableRun
from .public import public_tools
from .records import decode_model_response

__all__ = ["DurableModel"]


class _RunRef:
    """The durable run the wrappers record in: given, or opened on first use (a streamed run
    is handed to the SDK before anything can be awaited); with the caller's ``RunConfig``
    (``config``), the one the SDK's run is given (``sdk_config``) and the idempotent tools,
    which an agent tool's nested run takes over."""

    def __init__(self, run: DurableRun | None = None,
                 opener: Callable[[], Awaitable[DurableRun]] | None = None, *,
                 config: RunConfig, idempotent: Iterable[str]) -> None:
        self.run = run
        self._opener = opener
        self.config = config
        self.sdk_config = dataclasses.replace(config, model=None)
        self.idempotent = frozenset(idempotent)

    async def get(self) -> DurableRun:
        if self.run is None:
            assert self._opener is not None
            self.run = await self._opener()
        return self.run


class DurableModel(Model):
    """A model whose responses are recorded in the run's log before the SDK acts on them; a
    response already recorded for this step of the run is returned without a request."""

    def __init__(self, model: Model, ref: _RunRef, *, author: str) -> None:
        self.model = model
        self.ref = ref
        self.author = author

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        run = await self.ref.get()
        step = run.next_model
        if step < len(run.record.models):
            run.next_model += 1
            run.use_calls(step)
            return decode_model_response(run.record.models[step])
        # A request that fails takes no step: the SDK's retry asks for the same one again.
        response = await self.model.get_response(*public_tools(args, kwargs), **kwargs)
        await run.record_model(step, response, author=self.author,
                               skip_calls=_handoff_names(args, kwargs))
        run.next_model = step + 1
        return response

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        from openai.types.responses import Response, ResponseCompletedEvent

        run = await self.ref.get()
        step = run.next_model
        if step < len(run.record.models):
            run.next_model += 1
            run.use_calls(step)
            recorded = decode_model_response(run.record.models[step])
            yield ResponseCompletedEvent(type="response.completed", sequence_number=0,
                                         response=Response(
                id=recorded.response_id or f"replayed-{step}", created_at=0.0,
                model="replayed", object="response", output=recorded.output,
                parallel_tool_calls=False, tool_choice="auto", tools=[]))
            return
        # Closed here, in the task that iterates it, whenever the SDK stops early.
        inner: Any = self.model.stream_response(*public_tools(args, kwargs), **kwargs)
        async with contextlib.aclosing(inner) as stream:
            async for event in stream:
                if getattr(event, "type", None) == "response.completed":
                    from agents.items import ModelResponse
                    from agents.usage import Usage

                    done: Any = getattr(event, "response", None)
                    await run.record_model(step, ModelResponse(
                        output=list(done.output), usage=Usage(), response_id=done.id),
                        author=self.author, skip_calls=_handoff_names(args, kwargs))
                    run.next_model = step + 1
                yield event

    async def close(self) -> None:
        await self.model.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        # The SDK's hook (named private in its Model) for releasing a run's resources: the
        # wrapped model's, since the SDK sees only this one.
        await self.model._cleanup_on_run_end(owner)

    def get_retry_advice(self, request: Any) -> Any:
        """The wrapped model's advice on retrying a failed request."""
        return self.model.get_retry_advice(request)


def _handoff_names(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> frozenset[str]:
    handoffs = kwargs.get("handoffs", args[5] if len(args) > 5 else ())
    return frozenset(str(getattr(h, "tool_name", "")) for h in handoffs or ())
