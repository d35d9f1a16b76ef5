"""One durable run's I/O: what it read of the log, and every write it makes, in order.

``DurableRun`` is opened by ``EventStoreRunner`` for one call; it holds the run's ``RunRecord``
(see ``records``) and the log's version, and appends each event with ``expected_version``: a
concurrency error reads the events that came in between, folds them in, and retries, unless
they show another process doing this run's work (a record of the same model step, a claim or
output of the same call), which raises ``ConcurrentRunError``. Every write is one hop to the
store (``StoreHandle.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eventstore import (
    PARENT_LINK_KEY,
    REQUEST_CONFIRMATION_FUNCTION,
    ConcurrencyError,
    Content,
    Event,
    EventActions,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
    ToolConfirmation,
    claim_event,
    new_event_id,
)

from .items import call_id_of, mirrored_call_id, native_mirror, plain_item
from .records import RUN_KEY, RunRecord, encode_model_response, model_event, output_value
from .session import EventStoreSession

__all__ = ["CallInDoubtError", "ConcurrentRunError", "DurableRun"]

CONFIRMATION_REJECTED_KIND = "confirmation_rejected"
REJECTION_MESSAGE = "Tool execution was not approved."


class CallInDoubtError(StoreUsageError):
    """A tool call of the run was started and has no output (its process may have died while it
    ran), and its tool is not declared idempotent: the run stops instead of running it again.
    Decide with ``evs respond SESSION CALL_ID --result …`` (its result) or ``evs rerun``
    (allow one more run), then call the runner again. ``session_id``, ``function_call_id`` (the
    call's id in the log) and ``tool`` name it."""

    def __init__(self, *, session_id: str, function_call_id: str, tool: str) -> None:
        super().__init__(
            f"Call {function_call_id!r} of tool {tool!r} in session {session_id!r} was started "
            "and has no output, and the tool is not declared idempotent, so it is not run "
            "again: give its result with `evs respond` or allow a re-run with `evs rerun`, "
            "then run again.")
        self.session_id = session_id
        self.function_call_id = function_call_id
        self.tool = tool


class ConcurrentRunError(StoreUsageError):
    """Another process recorded this run's step first (a model response, a tool's claim or
    output): two runners are resuming the same session. Nothing was run twice."""

    def __init__(self, *, session_id: str, what: str) -> None:
        super().__init__(f"Another process recorded {what} of session {session_id!r} first: "
                         "two runners are resuming it at once; this one stops.")
        self.session_id = session_id


@dataclasses.dataclass(kw_only=True)
class DurableRun:
    """One call of ``EventStoreRunner`` on one session: the run's record and its writes."""

    session: EventStoreSession
    record: RunRecord
    base_items: list[Any]
    """The session's items when the run started (what the SDK reads as history)."""
    resumed: bool
    idempotent: frozenset[str]
    next_model: int = 0
    item_cursor: int = 0
    calls: dict[str, str] = dataclasses.field(default_factory=dict)
    """SDK call id → the call's id in the log, for the newest model response."""
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    held: list[Event] = dataclasses.field(default_factory=list)
    """Session items not appended yet: they go with the run's next write (they are derived
    from the model responses and outputs before them, so a crash that loses them loses
    nothing a replay does not write again)."""

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(cls, session: EventStoreSession, *, input_json: Any, agent: str,
                   idempotent: frozenset[str], resume_any: bool,
                   exact: bool = False, link: Mapping[str, Any] | None = None) -> DurableRun:
        """The session's unfinished run when ``input_json`` is its input (or empty, unless
        ``exact``; or anything with ``resume_any``), else a new run started now (an
        unfinished one is marked abandoned).

        With ``link`` the session is an agent tool's child session (one parent call, one
        run): its newest run is continued whatever its input and end (a completed one is
        replayed), and the first run's start is appended together with the link to the
        parent (``PARENT_LINK_KEY``), in one batch."""

        async def job(store: EventStore) -> DurableRun:
            return await cls._open(store, session, input_json=input_json, agent=agent,
                                   idempotent=idempotent, resume_any=resume_any, exact=exact,
                                   link=link)

        return await session._handle.run(job)

    @classmethod
    async def _open(cls, store: EventStore, session: EventStoreSession, *, input_json: Any,
                    agent: str, idempotent: frozenset[str], resume_any: bool,
                    exact: bool, link: Mapping[str, Any] | None) -> DurableRun:
        scope: dict[str, Any] = {"app_name": session._app_name, "user_id": session._user_id}
        newer: list[Event] = []
        record: RunRecord | None = None
        try:
            async for event in store.iter_backwards(session.session_id, **scope):
                record = RunRecord.starting(event)
                if record is not None:
                    break
                newer.append(event)
        except SessionNotFoundError:
            with contextlib.suppress(SessionExistsError):
                await store.create_session(session_id=session.session_id, **scope)
        if record is not None:
            for event in reversed(newer):
                record.feed(event)
            empty = not exact and input_json in ("", [], None)
            # An empty input continues the newest run: an unfinished one resumes, a completed
            # one is replayed from the log (its result again, nothing asked or run).
            if link is not None or (record.ended is None and (
                    resume_any or record.input == input_json or empty)) \
                    or (record.ended == "completed" and empty):
                base = await session._scan(store, limit=None, upto=record.start_seq)
                run = cls(session=session, record=record, idempotent=idempotent,
                          base_items=[item for _, item in reversed(base)], resumed=True)
                return run
        version, items = await session._head(store)
        run_id = f"run-{uuid.uuid4().hex}"
        events = []
        if record is None and link is not None:
            events.append(Event(author="user", custom_metadata={PARENT_LINK_KEY: dict(link)}))
        if record is not None and record.ended is None:
            events.append(Event(author="user", custom_metadata={
                RUN_KEY: {"run": record.run_id, "end": "abandoned"}}))
        events.append(Event(author="user", invocation_id=run_id, custom_metadata={
            RUN_KEY: {"run": run_id, "start": {"input": input_json, "agent": agent}}}))
        stored = await store.append(session.session_id, events, expected_version=version,
                                    **scope)
        fresh = RunRecord.starting(stored[-1])
        assert fresh is not None
        return cls(session=session, record=fresh, idempotent=idempotent,
                   base_items=list(items), resumed=False)

    # -- writes ----------------------------------------------------------------------------

    async def write(self, events: Sequence[Event],
                    conflict: Callable[[Event], str | None] | None = None) -> list[Event]:
        """Append ``events`` at the version this run has seen; on a concurrency error fold in
        the newer events and retry, unless ``conflict`` names one of them as this run's work
        done elsewhere (then ConcurrentRunError)."""
        session = self.session
        scope: dict[str, Any] = {"app_name": session._app_name, "user_id": session._user_id}

        async def job(store: EventStore) -> list[Event]:
            while True:
                try:
                    return await store.append(session.session_id, list(events),
                                              expected_version=self.record.version, **scope)
                except ConcurrencyError:
                    newer = await store.read(session.session_id, after=self.record.version,
                                             **scope)
                    for event in newer:
                        what = conflict(event) if conflict is not None else None
                        self.record.feed(event)
                        if what is not None:
                            raise ConcurrentRunError(session_id=session.session_id,
                                                     what=what) from None

        async with self.lock:
            events, self.held = [*self.held, *events], []
            stored = await session._handle.run(job)
            for event in stored:
                self.record.feed(event)
        return stored

    def _tag(self, **meaning: Any) -> dict[str, Any]:
        return {RUN_KEY: {"run": self.record.run_id, **meaning}}

    async def record_model(self, step: int, response: Any, *, author: str,
                           skip_calls: frozenset[str]) -> None:
        """Append model response ``step`` (before anything acts on it)."""
        event_id = new_event_id()
        event = model_event(run_id=self.record.run_id, step=step, author=author,
                            response=encode_model_response(response), event_id=event_id,
                            skip_calls=skip_calls)

        def conflict(other: Event) -> str | None:
            meaning = other.custom_metadata.get(RUN_KEY)
            if isinstance(meaning, Mapping) and meaning.get("run") == self.record.run_id \
                    and meaning.get("model") == step:
                return f"model response {step} of run {self.record.run_id}"
            return None

        await self.write([event], conflict)
        self.use_calls(step)

    def use_calls(self, step: int) -> None:
        """Map the SDK's call ids to the log's for model response ``step`` (the next tools)."""
        response = self.record.models[step]
        event_id = self.record.model_event_ids[step]
        for item in response.get("output", []):
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                call_id = str(item.get("call_id"))
                self.calls[call_id] = mirrored_call_id(call_id, event_id)

    def _call_conflict(self, call_id: str) -> Callable[[Event], str | None]:
        def conflict(other: Event) -> str | None:
            if call_id in other.started_call_ids or any(
                    r.id == call_id for r in other.function_responses()):
                return f"call {call_id!r}"
            return None

        return conflict

    async def claim(self, call_id: str, sdk_call_id: str, *, author: str) -> None:
        """Append the claim of ``call_id`` (docs/protocol.md §3) before its tool runs."""
        event = claim_event(session_id=self.session.session_id, call_ids=[call_id],
                            author=author, invocation_id=self.record.run_id)
        event = dataclasses.replace(event, custom_metadata={
            **event.custom_metadata, **self._tag(claim=sdk_call_id)})
        await self.write([event], self._call_conflict(call_id))

    async def record_output(self, call_id: str, sdk_call_id: str, *, tool: str, author: str,
                            response: dict[str, Any]) -> None:
        """Append the tool's output (§4) right after it ran."""
        event = Event(author=author, invocation_id=self.record.run_id,
                      content=Content(role="user", parts=(Part(function_response=FunctionResponse(
                          id=call_id, name=tool, response=response)),)),
                      custom_metadata=self._tag(output=sdk_call_id))
        await self.write([event], self._call_conflict(call_id))

    @staticmethod
    def output_response(value: Any) -> dict[str, Any]:
        """The §4 response of a tool's output."""
        return {"output": output_value(value)}

    async def add_items(self, items: list[Any]) -> None:
        """The SDK's ``Session.add_items`` for this run: items the log already holds (a
        resumed run replays them) are skipped, the rest appended, tagged with their place."""
        fresh: list[Event] = []
        for index, item in enumerate(items):
            plain = plain_item(item, index)
            position = self.item_cursor
            self.item_cursor += 1
            if position < len(self.record.items):
                continue
            event_id = new_event_id()
            author, content = native_mirror(plain, event_id)
            if author != "user" or call_id_of(plain, "function_call_output") is not None:
                content = None  # the run's model turns and outputs show these already
            from .items import METADATA_KEY

            fresh.append(Event(author=author, id=event_id, content=content, custom_metadata={
                METADATA_KEY: {"item": plain}, **self._tag(item=position)}))
        self.held.extend(fresh)

    def view_items(self) -> list[Any]:
        """The session's items as this run sees them: the history, then its own so far."""
        from .items import METADATA_KEY

        held = [e.custom_metadata[METADATA_KEY]["item"] for e in self.held]
        return [*self.base_items, *[*self.record.items, *held][: self.item_cursor]]

    def owns(self, item: Any) -> bool:
        """Whether interruption ``item`` asks for a call of this run's own model responses
        (not one inside an agent tool's nested run, whose child session holds its stop)."""
        sdk_call_id = str(getattr(item.raw_item, "call_id", "") or "")
        call = self.record.ledger.get(self.calls.get(sdk_call_id, "")).call
        name = str(getattr(item, "tool_name", None) or getattr(item.raw_item, "name", ""))
        return call is not None and call.name == name

    async def interrupt(self, interruptions: Sequence[Any], *, state: dict[str, Any]) -> None:
        """Record the run's stop for approvals: per call of its own a
        ``confirmation_required`` placeholder (§4), then one event holding ``state`` that is a
        confirmation request (§5) for those calls (calls inside agent tools are asked in their
        child sessions). Nothing is written when the newest stop already asks for exactly
        these calls, unanswered."""
        asked = [(item, str(getattr(item.raw_item, "call_id", "") or "")) for item in
                 interruptions]
        asked = [(item, sdk) for item, sdk in asked if sdk]
        if not asked:
            return
        own = [(item, sdk) for item, sdk in asked if self.owns(item)]
        nested = sorted([getattr(item.agent, "name", ""), sdk] for item, sdk in asked
                        if not self.owns(item))
        previous = self.record.interruption
        if previous is not None and sorted(previous.calls.values()) == sorted(
                s for _, s in own) and previous.nested == nested and not any(
                c in self.record.answers for c in previous.calls):
            return
        placeholders: list[Part] = []
        requests: list[Part] = []
        confirm_ids: dict[str, str] = {}
        asks: dict[str, ToolConfirmation] = {}
        author = ""
        for item, sdk_call_id in own:
            call_id = self.calls.get(sdk_call_id, sdk_call_id)
            name = str(getattr(item, "tool_name", None) or getattr(item.raw_item, "name", ""))
            author = author or getattr(item.agent, "name", "")
            from .records import _arguments

            args = _arguments(getattr(item.raw_item, "arguments", None))
            placeholders.append(Part(function_response=FunctionResponse(
                id=call_id, name=name, response={"error": {
                    "kind": "confirmation_required", "tool": name,
                    "message": f"Tool {name!r} needs approval before it runs."}})))
            asks[call_id] = ToolConfirmation(hint=f"Approve {name}?")
            confirm_id = f"confirm-{uuid.uuid4().hex}"
            confirm_ids[confirm_id] = sdk_call_id
            requests.append(Part(function_call=FunctionCall(
                id=confirm_id, name=REQUEST_CONFIRMATION_FUNCTION, args={
                    "originalFunctionCall": {"id": call_id, "name": name, "args": args},
                    "toolConfirmation": {"hint": f"Approve {name}?", "confirmed": False,
                                         "payload": None}})))
        author = author or self.record.agent
        events = [Event(author=author, invocation_id=self.record.run_id,
                        content=Content(role="user", parts=tuple(placeholders)),
                        actions=EventActions(requested_tool_confirmations=asks))] \
            if placeholders else []
        events.append(Event(
            author=author, invocation_id=self.record.run_id,
            content=Content(role="model", parts=tuple(requests)) if requests else None,
            long_running_tool_ids=tuple(confirm_ids),
            custom_metadata=self._tag(interrupt={
                "state": state, "models": self.next_model, "items": self.item_cursor,
                "calls": confirm_ids, "nested": nested})))
        await self.write(events)

    async def answer(self, decisions: Mapping[str, bool]) -> None:
        """Record in-process decisions (a ``RunState`` approved or rejected before it was
        given back) as confirmation answers (§6), for the confirmations the log has none of."""
        stop = self.record.interruption
        if stop is None:
            return
        parts = [Part(function_response=FunctionResponse(
            id=confirm_id, name=REQUEST_CONFIRMATION_FUNCTION,
            response={"confirmed": decisions[sdk], "payload": None}))
            for confirm_id, sdk in stop.calls.items()
            if sdk in decisions and confirm_id not in self.record.answers]
        if parts:
            await self.write([Event(author="user", content=Content(role="user",
                                                                   parts=tuple(parts)))])

    async def reject(self, call_id: str, *, tool: str, author: str) -> None:
        """Answer a rejected call with the SDK's rejection (once)."""
        if self.record.ledger.get(call_id).response is not None:
            return
        await self.record_output(call_id, call_id, tool=tool, author=author, response={
            "error": {"kind": CONFIRMATION_REJECTED_KIND, "tool": tool,
                      "message": REJECTION_MESSAGE}})

    async def end(self, how: str) -> None:
        """Record that the run returned (``completed``) or raised for good (``error``), once."""
        if self.record.ended is not None:
            return
        await self.write([Event(author="user", invocation_id=self.record.run_id,
                                custom_metadata=self._tag(end=how))])
