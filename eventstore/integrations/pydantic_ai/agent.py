"""``EventStoreAgent``: a pydantic-ai agent whose runs live in a session of the event store.

A ``WrapperAgent`` (as pydantic-ai's ``DBOSAgent`` is), built on pydantic-ai's public interface:
the model is wrapped by ``EventStoreModel`` (requests and responses appended as they happen),
every toolset by ``EventStoreToolset`` (claims, results, deferrals decided from the log), and
each run's ``message_history`` is the session's conversation. So:

- a chat is one session: ``run("next question", session_id="chat-1")`` continues it, in any
  process, after any restart;
- ``run(None, session_id=...)`` continues the session's unfinished run (after a crash, or once
  ``evs confirm`` / ``evs respond`` / ``evs rerun`` answered what it waited for): recorded model
  responses are not requested again, recorded tool results are not run again, a call that
  started without a result is in doubt and is not run again unless its tool is idempotent;
- a run that needs a human or the outside ends, as in pydantic-ai, with ``DeferredToolRequests``
  (use ``output_type=[..., DeferredToolRequests]``); the requests are in the log for
  ``evs pending``, and the next ``run(None, ...)`` hands pydantic-ai the answers from the log.

Usage counts what ran in this process: a resumed run's ``usage()`` has the requests it sent,
not the recorded ones (their usage stays in the log, on each model turn).
"""

from __future__ import annotations

import contextvars
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.agent import AbstractAgent, AgentRun, EventStreamHandler, WrapperAgent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model
from pydantic_ai.result import StreamedRunResult
from pydantic_ai.toolsets import AbstractToolset

from eventstore import EventStore, SessionNotFoundError
from eventstore.integrations._handle import StoreHandle

from .deferred import confirmation_events, open_calls
from .journal import RunJournal
from .messages import artifact_refs, messages_of
from .model import EventStoreModel
from .toolset import CURRENT_JOURNAL, EventStoreToolset

__all__ = ["EventStoreAgent", "SessionAddress"]


@dataclass(frozen=True, kw_only=True)
class SessionAddress:
    """Where a run's session lives in the store."""

    session_id: str
    """The session (one chat)."""
    user_id: str
    """The user the session belongs to."""
    app_name: str
    """The application the session belongs to."""


_ADDRESS: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "eventstore_pydantic_ai_address", default=(None, None))


class _AddressedContext:
    """An async context manager inside which the session address is set (pydantic-ai starts
    the run's task on the first event asked for, inside the block)."""

    def __init__(self, inner: Any, address: tuple[str | None, str | None]) -> None:
        self._inner = inner
        self._address = address
        self._token: contextvars.Token[tuple[str | None, str | None]] | None = None

    async def __aenter__(self) -> Any:
        self._token = _ADDRESS.set(self._address)
        return await self._inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            if self._token is not None:
                _ADDRESS.reset(self._token)


class EventStoreAgent(WrapperAgent[Any, Any]):
    """Wrap ``agent`` so that its runs are recorded in, and resumed from, the event store.

    ``store``: a store URL or path (opened on first use) or an open ``EventStore``.
    ``app_name`` / ``user_id`` / ``session_id``: the session address (``session_id`` and
    ``user_id`` may also be given to each run). ``idempotent_tools``: tools that may run again
    when a crash left their call without a result (reads, lookups); every other tool runs at
    most once. ``name``: the author of the agent's events (default: the agent's name).
    """

    def __init__(
        self,
        wrapped: AbstractAgent[Any, Any],
        *,
        store: str | os.PathLike[str] | EventStore,
        app_name: str = "pydantic-ai",
        user_id: str = "user",
        session_id: str | None = None,
        idempotent_tools: Sequence[str] = (),
        name: str | None = None,
        event_stream_handler: EventStreamHandler[Any] | None = None,
    ) -> None:
        super().__init__(wrapped)
        self._handle = StoreHandle(store, home_loop=not isinstance(store, EventStore))
        self._app_name = app_name
        self._user_id = user_id
        self._session_id = session_id
        self._idempotent = frozenset(idempotent_tools)
        self._name = name or wrapped.name or "agent"
        self._event_stream_handler = event_stream_handler
        model = wrapped.model
        self._model: EventStoreModel | None = (
            None if model is None else EventStoreModel(model if isinstance(model, Model)
                                                       else infer_model(model)))
        self._toolsets = [self._durable(t) for t in wrapped.toolsets]

    def _durable(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        if isinstance(toolset, EventStoreToolset):
            return toolset
        return EventStoreToolset(toolset, idempotent=self._idempotent)

    @property
    def name(self) -> str | None:
        return self._name

    @name.setter
    def name(self, value: str | None) -> None:
        raise UserError("The name of an EventStoreAgent is the author of its events; it is "
                        "fixed when the wrapper is made.")

    @property
    def model(self) -> Any:
        return self._model if self._model is not None else self.wrapped.model

    @property
    def event_stream_handler(self) -> EventStreamHandler[Any] | None:
        return self._event_stream_handler or super().event_stream_handler

    @property
    def toolsets(self) -> Sequence[AbstractToolset[Any]]:
        return self._toolsets

    @property
    def store(self) -> StoreHandle:
        """The store this agent writes to."""
        return self._handle

    async def aclose(self) -> None:
        """Close the store if this agent opened it from a URL."""
        await self._handle.close()

    def address(self, *, session_id: str | None = None, user_id: str | None = None
                ) -> SessionAddress:
        """The session a run with these options works on; UserError without a session id."""
        given_session, given_user = _ADDRESS.get()
        sid = session_id or given_session or self._session_id
        if not sid:
            raise UserError("EventStoreAgent needs a session: pass session_id= to the run "
                            "(or to the wrapper).")
        return SessionAddress(session_id=sid, user_id=user_id or given_user or self._user_id,
                              app_name=self._app_name)

    @contextmanager
    def _addressed(self, session_id: str | None, user_id: str | None) -> Iterator[None]:
        if session_id is None and user_id is None:
            yield
            return
        token = _ADDRESS.set((session_id, user_id))
        try:
            yield
        finally:
            _ADDRESS.reset(token)

    async def run(self, user_prompt: Any = None, *, session_id: str | None = None,
                  user_id: str | None = None, **kwargs: Any) -> Any:
        """``Agent.run`` on the session (see the class); ``session_id``/``user_id`` address it."""
        with self._addressed(session_id, user_id):
            return await super().run(user_prompt, **kwargs)

    def run_sync(self, user_prompt: Any = None, *, session_id: str | None = None,
                 user_id: str | None = None, **kwargs: Any) -> Any:
        """``Agent.run_sync`` on the session."""
        with self._addressed(session_id, user_id):
            return super().run_sync(user_prompt, **kwargs)

    @asynccontextmanager
    async def run_stream(self, user_prompt: Any = None, *, session_id: str | None = None,
                         user_id: str | None = None, **kwargs: Any
                         ) -> AsyncIterator[StreamedRunResult[Any, Any]]:
        """``Agent.run_stream`` on the session."""
        with self._addressed(session_id, user_id):
            async with super().run_stream(user_prompt, **kwargs) as streamed:
                yield streamed

    def run_stream_events(self, user_prompt: Any = None, *, session_id: str | None = None,
                          user_id: str | None = None, **kwargs: Any) -> Any:
        """``Agent.run_stream_events`` on the session (``async with ... as events``)."""
        address = self.address(session_id=session_id, user_id=user_id)
        return _AddressedContext(super().run_stream_events(user_prompt, **kwargs),
                                 (address.session_id, address.user_id))

    @asynccontextmanager
    async def iter(
        self,
        user_prompt: Any = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        message_history: Sequence[Any] | None = None,
        deferred_tool_results: DeferredToolResults | None = None,
        model: Any = None,
        toolsets: Sequence[AbstractToolset[Any]] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AgentRun[Any, Any]]:
        """``Agent.iter`` on the session: the history is the session's conversation, and what
        the run does is appended to it as it happens (see the class)."""
        address = self.address(session_id=session_id, user_id=user_id)
        journal = await self._journal(address)
        history = messages_of(journal.events, journal.artifacts)
        if message_history:
            if history:
                raise UserError(
                    f"Session {address.session_id!r} already holds a conversation, which is "
                    "the run's message history; pass message_history= only to a new session.")
            history = list(message_history)
        journal.recorded = len(messages_of(journal.events, journal.artifacts))
        if deferred_tool_results is not None:
            journal.handed = deferred_tool_results
            await journal.append_answers(deferred_tool_results)
        elif user_prompt is None:
            deferred_tool_results = self._answers(journal, history)
        run_model = self._model
        if model is not None:
            run_model = model if isinstance(model, EventStoreModel) else EventStoreModel(
                model if isinstance(model, Model) else infer_model(model))
        token = CURRENT_JOURNAL.set(journal)
        try:
            # Run-time toolsets join the durable ones (an override replaces them all).
            merged = [*self._toolsets, *(self._durable(t) for t in toolsets or ())]
            overrides: dict[str, Any] = {"toolsets": merged, "tools": []}
            if run_model is not None:
                overrides["model"] = run_model
            with super().override(**overrides):
                async with super().iter(
                    user_prompt,
                    message_history=history or None,
                    deferred_tool_results=deferred_tool_results,
                    **kwargs,
                ) as run:
                    yield run
                await self._finish(journal, run)
        finally:
            CURRENT_JOURNAL.reset(token)

    async def _journal(self, address: SessionAddress) -> RunJournal:
        async def load(store: EventStore) -> tuple[list[Any], int, dict[tuple[str, int], bytes]]:
            try:
                session = await store.get_session(address.session_id,
                                                  app_name=address.app_name,
                                                  user_id=address.user_id)
            except SessionNotFoundError:
                session = await store.create_session(app_name=address.app_name,
                                                     user_id=address.user_id,
                                                     session_id=address.session_id)
            contents = {}
            for name, number in artifact_refs(session.events):
                found = await store.load_artifact(address.session_id, name, version=number,
                                                  app_name=address.app_name,
                                                  user_id=address.user_id)
                contents[(name, number)] = found.data
            return session.events, session.version, contents

        events, version, contents = await self._handle.run(load)
        journal = RunJournal(
            handle=self._handle, session_id=address.session_id, app_name=address.app_name,
            user_id=address.user_id, author=self._name, invocation_id=f"e-{uuid.uuid4().hex}",
            idempotent=self._idempotent)
        journal.load(events, version)
        journal.artifacts.update(contents)
        return journal

    @staticmethod
    def _answers(journal: RunJournal, history: list[Any]) -> DeferredToolResults | None:
        output_tools = {n for n, k in journal.tool_kinds_logged().items() if k == "output"}
        calls = open_calls(history, output_tools=output_tools)
        if not calls:
            return None
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in calls:
            answer = journal.confirmations.answers.get(journal.stored_id(call.tool_call_id))
            approvals[call.tool_call_id] = ToolDenied() if answer is False else True
        return DeferredToolResults(approvals=approvals)

    async def _finish(self, journal: RunJournal, run: AgentRun[Any, Any]) -> None:
        await journal.record_messages(run.all_messages())
        result = run.result
        if result is None or not isinstance(result.output, DeferredToolRequests):
            return
        asked = []
        for part in result.output.approvals:
            stored = journal.stored_id(part.tool_call_id)
            record = journal.ledger.get(stored)
            if stored in journal.confirmations.requested and record.placeholder:
                continue
            if record.call is None:
                continue
            asked.append((record.call, f"Approve {part.tool_name}?"))
        events = confirmation_events(asked, author=journal.author,
                                     invocation_id=journal.invocation_id)
        if events:
            await journal.append(events)
