"""Contexts handed to tools: the read-only context of request building and the per-call ToolContext.

A ``ToolContext`` belongs to exactly one function call. Everything a tool changes through it —
state writes, artifact saves, confirmation requests, control flags — lands in its ``actions``
container, which the loop turns into the ``EventActions`` of the response event. Nothing is written
anywhere else, so the log stays the only source of truth.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from eventstore import Compaction, Event, EventActions, ToolConfirmation, idempotency_key
from runtime._exceptions import ToolContextError

__all__ = [
    "ArtifactService",
    "InMemoryArtifactService",
    "ReadonlyContext",
    "StateView",
    "ToolActions",
    "ToolContext",
    "idempotency_key",
]

@runtime_checkable
class ArtifactService(Protocol):
    """Versioned artifact storage scoped to one session (implemented over the store elsewhere)."""

    async def save(self, filename: str, data: bytes, mime_type: str) -> int:
        """Store a new version of ``filename`` and return its version (0 for the first)."""
        ...

    async def load(self, filename: str, version: int | None = None) -> bytes | None:
        """Return the bytes of ``version`` (the newest when ``None``), or ``None`` if absent."""
        ...

    async def list(self) -> list[str]:
        """Return the filenames that have at least one version, sorted."""
        ...

    async def latest_versions(self) -> dict[str, int]:
        """Return filename -> newest version for every filename ``list`` returns, sorted."""
        ...


class InMemoryArtifactService:
    """An ``ArtifactService`` that keeps every version in a dict; for tests and demos."""

    def __init__(self) -> None:
        self._versions: dict[str, list[tuple[bytes, str]]] = {}

    async def save(self, filename: str, data: bytes, mime_type: str) -> int:
        """Append a version and return its number (0, 1, 2 …)."""
        versions = self._versions.setdefault(filename, [])
        versions.append((bytes(data), mime_type))
        return len(versions) - 1

    async def load(self, filename: str, version: int | None = None) -> bytes | None:
        """Return the bytes of a version, the newest when ``version`` is ``None``."""
        versions = self._versions.get(filename)
        if not versions:
            return None
        if version is None:
            return versions[-1][0]
        if 0 <= version < len(versions):
            return versions[version][0]
        return None

    async def list(self) -> list[str]:
        """Return the stored filenames, sorted."""
        return sorted(self._versions)

    async def latest_versions(self) -> dict[str, int]:
        """Return filename -> newest version, sorted by filename."""
        return {name: len(self._versions[name]) - 1 for name in sorted(self._versions)}


@dataclass(kw_only=True)
class ToolActions:
    """The mutable side effects of one call, collected while the tool runs.

    Mutable on purpose (tools write to it); freeze it with ``to_event_actions`` when the call ends.
    It mirrors ``EventActions`` field for field (same names, types and defaults); this module
    refuses to import when the two drift apart (``_check_mirrors``), and both conversions go
    over ``EventActions``' fields, so a field added there cannot be dropped here.
    """

    state_delta: dict[str, Any] = field(default_factory=dict)
    """State changes of this call (``None`` is a value; deletions are ``state_deletions``)."""
    state_deletions: tuple[str, ...] = ()
    """State keys this call deletes (never also in ``state_delta``)."""
    artifact_delta: dict[str, int] = field(default_factory=dict)
    """Artifact filename -> version saved by this call."""
    requested_tool_confirmations: dict[str, ToolConfirmation] = field(default_factory=dict)
    """Function call id -> the confirmation this call asks for."""
    skip_summarization: bool = False
    """The model is not called again after this response."""
    escalate: bool = False
    """The agent hands control to its parent."""
    transfer_to_agent: str | None = None
    """Name of the agent to transfer control to."""
    compaction: Compaction | None = None
    """Mirrors ``EventActions.compaction``; a tool's value is not kept (responses are merged
    without it): sessions are compacted by ``runtime.compact`` and ``Agent(compaction=...)``."""

    def to_event_actions(self) -> EventActions:
        """Return an immutable ``EventActions`` snapshot (dicts are copied)."""
        return EventActions(**_copied(self))

    @classmethod
    def from_event_actions(cls, actions: EventActions) -> ToolActions:
        """Return a mutable copy of ``actions`` (dicts are copied)."""
        return cls(**_copied(actions))


def _copied(actions: ToolActions | EventActions) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(EventActions):
        value = getattr(actions, spec.name)
        values[spec.name] = dict(value) if isinstance(value, dict) else value
    return values


def _check_mirrors(mutable: type[Any], frozen: type[Any]) -> None:
    """Raise ``TypeError`` unless dataclass ``mutable`` has exactly ``frozen``'s fields, with the
    same type annotations and defaults."""

    def described(cls: type[Any]) -> dict[str, tuple[object, object]]:
        return {
            spec.name: (
                spec.type,
                spec.default_factory()
                if spec.default_factory is not dataclasses.MISSING
                else spec.default,
            )
            for spec in dataclasses.fields(cls)
        }

    ours, theirs = described(mutable), described(frozen)
    if ours != theirs:
        missing = sorted(theirs.keys() - ours.keys())
        extra = sorted(ours.keys() - theirs.keys())
        changed = sorted(k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k])
        raise TypeError(
            f"{mutable.__name__} must mirror {frozen.__name__} field for field: missing "
            f"{missing}, extra {extra}, different type or default {changed}."
        )


_check_mirrors(ToolActions, EventActions)


class StateView(MutableMapping[str, Any]):
    """Session state as one call sees it: the head state overlaid with this call's own changes.

    Reads see the call's own writes first; ``view[k] = v`` records ``k`` in
    ``actions.state_delta`` (``None`` is a value like any other) and ``del view[k]`` records
    ``k`` in ``actions.state_deletions``. The head mapping is never modified.
    """

    def __init__(self, head: Mapping[str, Any], actions: ToolActions) -> None:
        self._head = head
        self._actions = actions

    def _deleted(self, key: str) -> bool:
        return key in self._actions.state_deletions

    def __getitem__(self, key: str) -> Any:
        delta = self._actions.state_delta
        if key in delta:
            return delta[key]
        if self._deleted(key):
            raise KeyError(key)
        return self._head[key]

    def __setitem__(self, key: str, value: Any) -> None:
        actions = self._actions
        if key in actions.state_deletions:
            actions.state_deletions = tuple(k for k in actions.state_deletions if k != key)
        actions.state_delta[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        actions = self._actions
        actions.state_delta.pop(key, None)
        if key in self._head:  # deleting only this call's own write needs no record
            actions.state_deletions = (*actions.state_deletions, key)

    def __iter__(self) -> Iterator[str]:
        delta = self._actions.state_delta
        for key in self._head:
            if key not in delta and not self._deleted(key):
                yield key
        yield from delta

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key in self._actions.state_delta:
            return True
        return not self._deleted(key) and key in self._head

    def __repr__(self) -> str:
        return f"StateView({dict(self)!r})"


@dataclass(frozen=True, kw_only=True)
class ReadonlyContext:
    """What request building may read: ids, the head state and the artifact service.

    Toolsets receive it in ``tools(readonly_context)`` to decide what to expose.
    """

    invocation_id: str
    """Id of the current agent invocation."""
    agent_name: str
    """Name of the agent the request is built for."""
    session_id: str
    """Id of the session."""
    state: Mapping[str, Any] = field(default_factory=dict)
    """Head state of the session (read-only)."""
    artifacts: ArtifactService | None = None
    """The session's artifact service, if any."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The invocation's side-channel metadata (trace ids …); never sent to the model or logged."""


class ToolContext:
    """Everything one function call may see and do.

    ``function_call_id`` is ``""`` during request preprocessing, where there is no call. All effects
    go to ``actions``; the context never writes to the store itself.
    """

    def __init__(
        self,
        *,
        function_call_id: str,
        invocation_id: str,
        agent_name: str,
        session_id: str,
        state: Mapping[str, Any] | None = None,
        actions: ToolActions | None = None,
        artifacts: ArtifactService | None = None,
        cancel_event: asyncio.Event | None = None,
        tool_confirmation: ToolConfirmation | None = None,
        metadata: dict[str, Any] | None = None,
        event_sink: Callable[[Event], None] | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> None:
        self.function_call_id = function_call_id
        """Id of the call this context belongs to; ``""`` during preprocessing."""
        self.invocation_id = invocation_id
        """Id of the current agent invocation."""
        self.agent_name = agent_name
        """Name of the agent running the tool."""
        self.session_id = session_id
        """Id of the session."""
        self.app_name = app_name
        """The session's app (with ``user_id`` it addresses the session: ids are unique per
        app and user), or None when the context was made without one."""
        self.user_id = user_id
        """The session's user, or None (see ``app_name``)."""
        self.actions = actions if actions is not None else ToolActions()
        """The side effects of this call (mutable)."""
        self.state = StateView(state if state is not None else {}, self.actions)
        """Head state overlaid with this call's changes; writes go to ``actions.state_delta``,
        deletions to ``actions.state_deletions``."""
        self.cancel_event = cancel_event if cancel_event is not None else asyncio.Event()
        """Set when the invocation is being cancelled (the task running it was cancelled); a tool
        that cannot be interrupted by ``asyncio`` cancellation — a sync tool in a worker thread —
        should poll ``cancelled`` and stop."""
        self.tool_confirmation = tool_confirmation
        """The human's answer when this call is a re-run after a confirmation, else ``None``."""
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}
        """A side channel for callbacks and tracing (the loop gives each call a copy of the
        invocation's metadata); never sent to the model and never written to the log."""
        self._artifacts = artifacts
        self._event_sink = event_sink

    def emit_event(self, event: Event) -> None:
        """Hand ``event`` to the caller's event stream (``Runner.run_events``) now; it is never
        appended to the log. Does nothing when no caller listens."""
        if self._event_sink is not None:
            self._event_sink(event)

    @classmethod
    def for_preprocessing(cls, readonly: ReadonlyContext) -> ToolContext:
        """Return a context for request preprocessing (no call: the id is empty)."""
        return cls(
            function_call_id="",
            invocation_id=readonly.invocation_id,
            agent_name=readonly.agent_name,
            session_id=readonly.session_id,
            state=readonly.state,
            artifacts=readonly.artifacts,
            metadata=dict(readonly.metadata),
        )

    @property
    def cancelled(self) -> bool:
        """True once cancellation was requested."""
        return self.cancel_event.is_set()

    @property
    def idempotency_key(self) -> str:
        """Stable key of this call (see ``idempotency_key``); the same on every re-run."""
        return idempotency_key(self.session_id, self.function_call_id)

    @property
    def artifacts(self) -> ArtifactService:
        """The artifact service; raises ``ToolContextError`` when this context has none."""
        if self._artifacts is None:
            raise ToolContextError(
                f"No artifact service is configured for the tool context of call "
                f"{self.function_call_id!r} in session {self.session_id!r}.",
                function_call_id=self.function_call_id,
            )
        return self._artifacts

    async def save_artifact(
        self, filename: str, data: bytes, *, mime_type: str = "application/octet-stream"
    ) -> int:
        """Save a new artifact version, record it in ``actions.artifact_delta``, return it."""
        version = await self.artifacts.save(filename, data, mime_type)
        self.actions.artifact_delta[filename] = version
        return version

    async def load_artifact(self, filename: str, *, version: int | None = None) -> bytes | None:
        """Return an artifact's bytes (newest version by default), or ``None`` if absent."""
        return await self.artifacts.load(filename, version)

    async def list_artifacts(self) -> list[str]:
        """Return the session's artifact filenames, sorted."""
        return await self.artifacts.list()

    async def artifact_versions(self) -> dict[str, int]:
        """Return filename -> newest version of the session's artifacts, sorted by filename."""
        return await self.artifacts.latest_versions()

    def request_confirmation(self, *, hint: str = "", payload: Any = None) -> ToolConfirmation:
        """Ask a human to confirm this call; records the request and returns it.

        The pipeline sees the request after the tool returns and answers the model with a
        ``confirmation_required`` error. Raises ``ToolContextError`` during preprocessing.
        """
        if not self.function_call_id:
            raise ToolContextError(
                "A confirmation can only be requested while a function call runs, not during "
                f"request preprocessing (session {self.session_id!r}).",
                function_call_id=self.function_call_id,
            )
        confirmation = ToolConfirmation(hint=hint, payload=payload)
        self.actions.requested_tool_confirmations[self.function_call_id] = confirmation
        self.actions.skip_summarization = True
        return confirmation

    def __repr__(self) -> str:
        return (
            f"ToolContext(function_call_id={self.function_call_id!r}, "
            f"agent_name={self.agent_name!r}, session_id={self.session_id!r})"
        )
