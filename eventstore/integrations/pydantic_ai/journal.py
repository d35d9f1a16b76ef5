"""The run's journal: the one writer of a run's events to its session, and what it knows of
the log (the version it saw, the call ledger, the confirmations, the conversation so far).

Every write is one ``append`` with ``expected_version`` (serialized by a lock: parallel tool
calls of one step share it). A claim that meets a concurrency error means another process moved
the session: the call does not run (``SessionMovedError``). Results are facts once the tool has
run: on a concurrency error they are appended at the new head, left out when the newer events
already answered the call (docs/protocol.md §4).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
    CallLedger,
    ConcurrencyError,
    Content,
    Event,
    EventStore,
    FunctionResponse,
    Part,
    claim_event,
)
from eventstore.integrations._handle import StoreHandle

from .deferred import Confirmations, confirmation_events
from .messages import (
    ARTIFACT_KEY,
    MESSAGE_KEY,
    TOOL_KINDS_KEY,
    artifact_name,
    call_id_map,
    request_event,
    response_event,
    result_payload,
    split_binaries,
)

__all__ = ["RunJournal", "SessionMovedError"]


class SessionMovedError(RuntimeError):
    """Another process appended to the session while this run was about to claim a call: the
    call did not run. Run again to continue from the log."""


@dataclass(kw_only=True)
class RunJournal:
    """What one run writes and knows (one per ``EventStoreAgent`` run)."""

    handle: StoreHandle
    session_id: str
    app_name: str
    user_id: str
    author: str
    invocation_id: str
    idempotent: frozenset[str]
    events: list[Event] = field(default_factory=list)
    version: int = 0
    recorded: int = 0
    """How many messages of the run's conversation are in the log."""
    long_running: set[str] = field(default_factory=set)
    """Names of tools whose calls wait for a result from outside (external tools)."""
    tool_kinds: dict[str, str] = field(default_factory=dict)
    ledger: CallLedger = field(default_factory=CallLedger)
    confirmations: Confirmations = field(default_factory=Confirmations)
    call_ids: dict[str, str] = field(default_factory=dict)
    """Provider call id → stored call id."""
    artifacts: dict[tuple[str, int], bytes] = field(default_factory=dict)
    """Bytes of the artifacts the conversation stands on, by (filename, version)."""
    model_requests: int = 0
    """Model requests this process really sent."""
    handed: DeferredToolResults | None = None
    """The answers the caller handed to this run (``deferred_tool_results=``)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def load(self, events: Sequence[Event], version: int) -> None:
        """Take the session's events as read."""
        self.events = list(events)
        self.version = version
        self.ledger = CallLedger.of(self.events)
        self.confirmations = Confirmations.of(self.events)
        self.call_ids = call_id_map(self.events)

    def marker(self, metadata: dict[str, Any]) -> Event:
        """An event without content that carries ``metadata`` (a decision, a deferral)."""
        return Event(author=self.author, invocation_id=self.invocation_id,
                     custom_metadata=metadata)

    def tool_kinds_logged(self) -> dict[str, str]:
        """``{tool name: kind}`` of the newest model turn that recorded them."""
        for event in reversed(self.events):
            kinds = event.custom_metadata.get(TOOL_KINDS_KEY)
            if isinstance(kinds, dict):
                return {str(k): str(v) for k, v in kinds.items()}
        return {}

    def stored_id(self, provider_id: str) -> str:
        """The stored id of the call the model named ``provider_id`` (newest use)."""
        return self.call_ids.get(provider_id, provider_id)

    async def _append(self, batch: list[Event], *, check: bool = True) -> list[Event]:
        async def job(store: EventStore) -> list[Event]:
            return await store.append(
                self.session_id, batch, expected_version=self.version if check else None,
                app_name=self.app_name, user_id=self.user_id)

        written = await self.handle.run(job)
        self._took(written)
        return written

    def _took(self, written: list[Event]) -> None:
        for event in written:
            self.events.append(event)
            self.ledger.feed(event)
            if event.seq is not None:
                self.version = max(self.version, event.seq)
        self.confirmations = Confirmations.of(self.events)

    async def _reread(self) -> None:
        async def job(store: EventStore) -> list[Event]:
            return await store.read(self.session_id, after=self.version,
                                    app_name=self.app_name, user_id=self.user_id)

        self._took(await self.handle.run(job))

    async def append(self, batch: list[Event]) -> list[Event]:
        """Append ``batch`` after the version this run saw."""
        async with self._lock:
            return await self._append(batch)

    async def record_messages(self, messages: Sequence[ModelMessage]) -> None:
        """Append the messages of ``messages`` past the ones already recorded, one event each."""
        async with self._lock:
            batch: list[Event] = []
            answered = {cid for cid, r in self.ledger.records.items() if r.response is not None}
            used = set(self.ledger.records)
            for message in messages[self.recorded:]:
                if isinstance(message, ModelResponse):
                    event, ids = response_event(
                        message, author=self.author, invocation_id=self.invocation_id,
                        used_ids=used, long_running=self.long_running,
                        tool_kinds=self.tool_kinds)
                    self.call_ids.update(ids)
                    used.update(ids.values())
                elif isinstance(message, ModelRequest):
                    event = request_event(message, invocation_id=self.invocation_id,
                                          call_ids=self.call_ids, answered=answered)
                    if event.content is not None:
                        answered.update(p.function_response.id for p in event.content.parts
                                        if p.function_response is not None)
                else:  # pragma: no cover - ModelMessage is a closed union
                    continue
                batch.append(await self._save_binaries(event))
            if batch:
                await self._append_results(batch)
                self.recorded = len(messages)

    async def append_answers(self, results: DeferredToolResults) -> None:
        """Record answers a caller hands to a run (``deferred_tool_results=``) as the log's own
        (§6 confirmation answers, §7 results), unless the log already answered those calls."""
        await self._request_handed(results)
        parts: list[Part] = []
        for provider_id, approval in results.approvals.items():
            stored = self.stored_id(provider_id)
            request = self.confirmations.requested.get(stored)
            if request is None or stored in self.confirmations.answers:
                continue
            confirmed = not isinstance(approval, ToolDenied) and approval is not False
            parts.append(Part(function_response=FunctionResponse(
                id=request, name=REQUEST_CONFIRMATION_FUNCTION,
                response={"confirmed": confirmed, "payload": None})))
        for provider_id, value in results.calls.items():
            stored = self.stored_id(provider_id)
            record = self.ledger.get(stored)
            if record.response is not None or record.call is None:
                continue
            parts.append(Part(function_response=FunctionResponse(
                id=stored, name=record.call.name, response=result_payload(value))))
        if parts:
            await self.append([Event(author="user", invocation_id=self.invocation_id,
                                     content=Content(role="user", parts=tuple(parts)))])

    async def _request_handed(self, results: DeferredToolResults) -> None:
        """A caller may approve a call that was asked for outside this session (another store,
        or no store: a history passed as ``message_history=``). Once the call is in the log, its
        confirmation request is appended first, so the log holds the approval as it would after
        ``evs confirm``, and the call runs approved."""
        asked = []
        for provider_id in results.approvals:
            stored = self.stored_id(provider_id)
            record = self.ledger.get(stored)
            if (record.call is None or record.response is not None
                    or stored in self.confirmations.requested):
                continue
            asked.append((record.call, f"Approve {record.call.name}?"))
        events = confirmation_events(asked, author=self.author, invocation_id=self.invocation_id)
        if events:
            await self.append(events)

    async def _save_binaries(self, event: Event) -> Event:
        """Save the bytes of the event's message as artifacts, referenced in their place."""
        dumped = event.custom_metadata[MESSAGE_KEY]
        found = split_binaries(dumped)
        if not found:
            return event
        refs: list[Part] = []
        delta: dict[str, int] = {}
        for mapping, data, mime in found:
            name = artifact_name(data)

            async def save(store: EventStore, name: str = name, data: bytes = data,
                           mime: str = mime) -> int:
                return await store.save_artifact(
                    self.session_id, name, data, mime_type=mime or "application/octet-stream",
                    app_name=self.app_name, user_id=self.user_id)

            version = delta.get(name)
            if version is None:
                version = delta[name] = await self.handle.run(save)
                self.artifacts[(name, version)] = data
                refs.append(Part(artifact=ArtifactRef(
                    filename=name, version=version,
                    mime_type=mime or "application/octet-stream")))
            mapping["data"] = ""
            mapping[ARTIFACT_KEY] = {"filename": name, "version": version}
        parts = (*(event.content.parts if event.content else ()), *refs)
        return replace(event, content=Content(
            role=event.content.role if event.content else "user", parts=parts),
            actions=replace(event.actions, artifact_delta={**event.actions.artifact_delta,
                                                          **delta}))

    async def claim(self, call_id: str) -> None:
        """Append the claim of ``call_id`` (before its tool runs); SessionMovedError when the
        session moved on."""
        async with self._lock:
            event = claim_event(session_id=self.session_id, call_ids=[call_id],
                                author=self.author, invocation_id=self.invocation_id)
            try:
                await self._append([event])
            except ConcurrencyError as exc:
                raise SessionMovedError(
                    f"Session {self.session_id!r} moved on (another process wrote to it) before "
                    f"call {call_id!r} was claimed; the call did not run. Run again to continue."
                ) from exc

    async def record_result(self, event: Event) -> None:
        """Append a function-response event (the tool ran: its result is a fact)."""
        async with self._lock:
            await self._append_results([event])

    async def _append_results(self, batch: list[Event]) -> None:
        try:
            await self._append(batch)
        except ConcurrencyError:
            await self._reread()
            kept = [e for e in map(self._unanswered, batch) if e is not None]
            if kept:
                await self._append(kept, check=False)

    def _unanswered(self, event: Event) -> Event | None:
        """``event`` without the responses of calls the log answered meanwhile (the first
        answer wins); None when nothing is left."""
        if event.content is None:
            return event
        parts = tuple(p for p in event.content.parts if p.function_response is None
                      or self.ledger.get(p.function_response.id).response is None)
        if len(parts) == len(event.content.parts):
            return event
        if not parts and MESSAGE_KEY not in event.custom_metadata:
            return None
        return replace(event, content=Content(role=event.content.role, parts=parts)
                       if parts else None)

    def metadata(self) -> dict[str, Any]:
        """What the run reports of itself."""
        return {"session_id": self.session_id, "invocation_id": self.invocation_id}
