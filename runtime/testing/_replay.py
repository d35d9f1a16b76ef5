"""Replay a recorded session against today's code and fail with a readable diff on divergence.

A recording is the session's events (``evs export`` JSON Lines, or a list of events). The replay
feeds the recorded inputs (every event not authored by the agent: user messages, confirmation
answers, submitted results, decisions) to a fresh in-memory store, lets a ``Runner`` run the
agent with a model that returns the recorded model turns in order, and compares what the runner
appends with what was recorded, event by event. Tools run for real, or are stubbed from their
recorded responses.

Compared: author, branch, content, actions, long-running and started ids, flags, error fields,
custom metadata. Ignored: event ids, invocation ids, timestamps, who claimed a call and when
(``custom_metadata.claimed_by``). Confirmation-request ids are
random per run; they are matched by position and translated both ways.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pydantic

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    SCHEMA_VERSION,
    Content,
    Event,
    EventStore,
    FunctionResponse,
    Part,
    open_store,
)
from eventstore.commands import ExportedArtifact, ExportFormatError, dump_artifact, parse_export
from runtime._agent import Agent
from runtime._context import ToolContext
from runtime._exceptions import RecordingError
from runtime._invocation import LoopRequestProcessor, ResumePlanner
from runtime._model import ModelResponse
from runtime._runner import Runner
from runtime.declarations import FunctionDeclaration
from runtime.replay import ReplayResumePlanner
from runtime.tools import FunctionToolLike, ModelRequest, Tool, requires_confirmation

__all__ = [
    "RecordedModel",
    "Recording",
    "ReplayDivergence",
    "ReplayResult",
    "dump_recording",
    "load_recording",
    "replay_recording",
]

_EVENT = pydantic.TypeAdapter(Event)
_IGNORED = frozenset({"id", "invocation_id", "timestamp", "seq"})
_IGNORED_PATHS = frozenset({"custom_metadata.claimed_by"})
_EXPORT_FORMAT = "agent-eventstore/session"


@dataclass(frozen=True, kw_only=True)
class Recording:
    """A recorded session: its identity and its events, oldest first."""

    app_name: str = "replay"
    """Application the session belonged to."""
    user_id: str = "user"
    """User the session belonged to."""
    session_id: str = "replay"
    """The session's id (idempotency keys derive from it, so the replay reuses it)."""
    events: tuple[Event, ...] = ()
    """The events, oldest first."""
    artifacts: tuple[ExportedArtifact, ...] = ()
    """The artifact versions the export carried (by filename, then version 0, 1, 2 …)."""


class ReplayDivergence(AssertionError):
    """Today's code produced a different event than the recording; names the first one.

    ``seq`` is the position in the log, ``field`` the dotted path of the first differing field
    (``""`` when a whole event is missing or extra), ``expected``/``actual`` the two values.
    """

    def __init__(self, *, seq: int, field: str, expected: Any, actual: Any, detail: str) -> None:
        where = f"field {field}" if field else "the event"
        super().__init__(
            f"Replay diverged at seq {seq}, {where}:\n  expected: {expected!r}\n  actual:   "
            f"{actual!r}\n{detail}"
        )
        self.seq = seq
        self.field = field
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """A replay that matched the recording."""

    events: tuple[Event, ...]
    """The events the replay produced (they match the recording)."""
    model_calls: int
    """How many recorded model turns were used."""


def dump_recording(recording: Recording) -> bytes:
    """Return the recording as ``evs export`` writes it: a header line, one event per line, then
    one line per artifact version."""
    header = {
        "format": _EXPORT_FORMAT,
        "version": 2,
        "schema_version": SCHEMA_VERSION,
        "app_name": recording.app_name,
        "user_id": recording.user_id,
        "session_id": recording.session_id,
        "events": len(recording.events),
        "artifacts": len(recording.artifacts),
        "created_at": recording.events[0].timestamp if recording.events else 0.0,
    }
    lines = [orjson.dumps(header)]
    lines += [orjson.dumps(dataclasses.replace(e, seq=None)) for e in recording.events]
    lines += [dump_artifact(a) for a in recording.artifacts]
    return b"".join(line + b"\n" for line in lines)


def load_recording(source: str | os.PathLike[str] | bytes) -> Recording:
    """Read a recording: exactly what ``evs export`` writes (path or bytes: header, events,
    artifact versions), or JSON Lines of events only.

    Raises ``RecordingError`` (a ``ValueError``) naming the line that is not a valid event,
    header or artifact.
    """
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    lines = raw.splitlines()
    first = next((line for line in lines if line.strip()), b"")
    try:
        header = orjson.loads(first) if first else None
    except orjson.JSONDecodeError:
        header = None
    if isinstance(header, dict) and header.get("format") == _EXPORT_FORMAT:
        if header.get("schema_version") != SCHEMA_VERSION:
            raise RecordingError(
                f"Line 1 of the recording is not a valid header: schema version "
                f"{header.get('schema_version')!r}; this code replays {SCHEMA_VERSION} (import "
                "and re-export it to upgrade)",
                line=1,
            )
        try:
            export = parse_export(lines)
        except ExportFormatError as exc:
            raise RecordingError(
                f"The recording is not a valid export: {exc}", line=exc.line
            ) from exc
        return Recording(
            app_name=export.app_name,
            user_id=export.user_id,
            session_id=export.session_id,
            events=tuple(
                dataclasses.replace(e, seq=n) for n, e in enumerate(export.events, start=1)
            ),
            artifacts=tuple(export.artifacts),
        )
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = _EVENT.validate_python(orjson.loads(line))
        except ValueError as exc:
            raise RecordingError(
                f"Line {number} of the recording is not a valid event: {exc}", line=number
            ) from exc
        events.append(dataclasses.replace(event, seq=len(events) + 1))
    return Recording(events=tuple(events))


class RecordedModel:
    """A model that returns the recorded model turns of one agent, in order.

    A call beyond the recording raises ``ReplayDivergence`` (today's code asks the model more often
    than the recorded run did).
    """

    def __init__(self, events: Sequence[Event], *, agent_name: str) -> None:
        self.turns = [
            dataclasses.replace(
                ModelResponse.from_content(e.content),
                custom_metadata=dict(e.custom_metadata),
            )
            for e in _model_turns(events, agent_name)
            if e.content is not None
        ]
        """The recorded responses, in order, with the metadata the model events recorded (the
        ids the model gave, when they were replaced by unique ones, are among it)."""
        self.calls = 0
        """How many have been returned."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Return the next recorded turn."""
        if self.calls >= len(self.turns):
            raise ReplayDivergence(
                seq=0,
                field="model call",
                expected=f"{len(self.turns)} model calls",
                actual=f"model call #{self.calls + 1}",
                detail="Today's code calls the model more often than the recording did.",
            )
        self.calls += 1
        return self.turns[self.calls - 1]


def _model_turns(events: Sequence[Event], agent_name: str) -> list[Event]:
    turns: list[Event] = []
    previous: Event | None = None
    for event in events:
        content = event.content
        if (
            event.author == agent_name
            and content is not None
            and content.role == "model"
            and not any(
                p.function_call is not None
                and p.function_call.name == REQUEST_CONFIRMATION_FUNCTION
                for p in content.parts
            )
            # a display-text event follows a skip-summarization response: the loop wrote it
            and not (previous is not None and previous.actions.skip_summarization)
        ):
            turns.append(event)
        previous = event
    return turns


class _StubbedTool:
    """A tool that answers with the recorded response of each call instead of running."""

    def __init__(
        self, tool: FunctionToolLike, recorded: Mapping[str, _Recorded]
    ) -> None:
        self._tool = tool
        self._recorded = recorded
        self.idempotent = getattr(tool, "idempotent", False)

    @property
    def name(self) -> str:
        return self._tool.name

    @property
    def description(self) -> str:
        return self._tool.description

    @property
    def is_long_running(self) -> bool:
        return self._tool.is_long_running

    def declaration(self) -> FunctionDeclaration:
        return self._tool.declaration()

    def defers_response(self) -> bool:
        return self._tool.is_long_running

    def requires_confirmation_for(self, args: Mapping[str, Any]) -> bool:
        return requires_confirmation(self._tool, args)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        found = self._recorded.get(ctx.function_call_id)
        if found is None:
            return None if self._tool.is_long_running else {"error": "no recorded response"}
        response, (state_delta, deletions) = found
        # merging identical deltas is idempotent, so every stubbed call of the event may write all
        ctx.actions.state_delta.update(state_delta)
        ctx.actions.state_deletions = tuple(
            dict.fromkeys((*ctx.actions.state_deletions, *deletions))
        )
        return dict(response)


_Recorded = tuple[Any, tuple[dict[str, Any], tuple[str, ...]]]
"""A recorded response and the state changes (delta, deletions) of its event."""


def _recorded_responses(events: Sequence[Event], agent_name: str) -> dict[str, _Recorded]:
    found: dict[str, _Recorded] = {}
    for event in events:
        if event.author != agent_name:
            continue
        for response in event.function_responses():
            error = response.response.get("error")
            kind = error.get("kind") if isinstance(error, dict) else None
            if kind not in ("confirmation_required", "confirmation_rejected"):
                found[response.id] = (response.response, (dict(event.actions.state_delta),
                                                          event.actions.state_deletions))
    return found


def _plain(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _first_difference(expected: Any, actual: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            if not path and key in _IGNORED:
                continue
            where = f"{path}.{key}" if path else key
            if where in _IGNORED_PATHS:
                continue
            found = _first_difference(expected.get(key), actual.get(key), where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for index in range(max(len(expected), len(actual))):
            if index >= len(expected) or index >= len(actual):
                return (f"{path}[{index}]", expected[index : index + 1], actual[index : index + 1])
            found = _first_difference(expected[index], actual[index], f"{path}[{index}]")
            if found is not None:
                return found
        return None
    return None if expected == actual else (path, expected, actual)


class _Ids:
    """Recorded ↔ actual confirmation-request ids (minted anew by every run)."""

    def __init__(self) -> None:
        self.to_actual: dict[str, str] = {}
        self.to_recorded: dict[str, str] = {}

    def learn(self, recorded: Event, actual: Event) -> None:
        for r, a in zip(recorded.function_calls(), actual.function_calls(), strict=False):
            if r.name == a.name == REQUEST_CONFIRMATION_FUNCTION and r.id != a.id:
                self.to_actual[r.id], self.to_recorded[a.id] = a.id, r.id

    def rewrite(self, event: Event, mapping: Mapping[str, str]) -> Event:
        if event.content is None or not mapping:
            return event
        parts = []
        for part in event.content.parts:
            fc, fr = part.function_call, part.function_response
            if fc is not None and fc.id in mapping:
                part = Part(function_call=dataclasses.replace(fc, id=mapping[fc.id]))
            elif fr is not None and fr.id in mapping:
                part = Part(
                    function_response=FunctionResponse(
                        id=mapping[fr.id], name=fr.name, response=fr.response
                    )
                )
            parts.append(part)
        return dataclasses.replace(
            event,
            content=Content(role=event.content.role, parts=tuple(parts)),
            long_running_tool_ids=tuple(mapping.get(i, i) for i in event.long_running_tool_ids),
        )


def _check(recorded: Sequence[Event], actual: Sequence[Event], ids: _Ids) -> None:
    for index, got in enumerate(actual):
        seq = index + 1
        if index >= len(recorded):
            raise ReplayDivergence(
                seq=seq,
                field="",
                expected=None,
                actual=_summary(got),
                detail="Today's code appended an event the recording does not have.",
            )
        want = recorded[index]
        ids.learn(want, got)
        normalized = ids.rewrite(got, ids.to_recorded)
        found = _first_difference(_plain(want), _plain(normalized))
        if found is not None:
            field, expected, value = found
            raise ReplayDivergence(
                seq=seq,
                field=field,
                expected=expected,
                actual=value,
                detail=f"  recorded event: {_summary(want)}\n  replayed event: {_summary(got)}",
            )


def _summary(event: Event) -> str:
    calls = ", ".join(f"{c.name}({c.args})" for c in event.function_calls())
    responses = ", ".join(r.name for r in event.function_responses())
    what = (
        f"calls {calls}"
        if calls
        else f"responses of {responses}"
        if responses
        else f"text {event.text()!r}"
        if event.text()
        else f"claims {list(event.started_call_ids)}"
        if event.started_call_ids
        else "no content"
    )
    return f"seq {event.seq} by {event.author}: {what}"


async def replay_recording(
    recording: Recording | Sequence[Event],
    *,
    agent: Agent,
    stub_tools: bool | Collection[str] = False,
    request_processors: Sequence[LoopRequestProcessor] | None = None,
    resume_planner: ResumePlanner | None = None,
    store: EventStore | None = None,
) -> ReplayResult:
    """Replay ``recording`` with ``agent`` (its model is replaced by the recorded turns).

    ``stub_tools`` (True, or tool names) answers those tools from their recorded responses
    instead of running them. Returns when every event matches; raises ``ReplayDivergence``
    naming the first differing event (seq, field, expected vs actual) otherwise.
    """
    if not isinstance(recording, Recording):
        recording = Recording(events=tuple(recording))
    events = recording.events
    model = RecordedModel(events, agent_name=agent.name)
    tools: list[Tool] = list(agent.tools)
    if stub_tools:
        answers = _recorded_responses(events, agent.name)
        tools = [
            _StubbedTool(t, answers)
            if isinstance(t, FunctionToolLike) and (stub_tools is True or t.name in stub_tools)
            else t
            for t in tools
        ]
    replayed = dataclasses.replace(agent, model=model, tools=tuple(tools))
    own = store if store is not None else await open_store("memory://")
    runner = Runner(
        agent=replayed,
        store=own,
        app_name=recording.app_name,
        request_processors=request_processors,
        resume_planner=resume_planner if resume_planner is not None else ReplayResumePlanner(),
    )
    await own.create_session(
        app_name=recording.app_name, user_id=recording.user_id, session_id=recording.session_id
    )
    await _restore_artifacts(own, recording, agent.name)
    try:
        return await _drive(runner, own, recording, model)
    finally:
        if store is None:
            await own.aclose()


async def _restore_artifacts(store: EventStore, recording: Recording, agent_name: str) -> None:
    """Save the recorded artifact versions the replayed agent does not save itself.

    Versions an agent event recorded in its ``artifact_delta`` are saved again by the tools that
    run during the replay (so the numbers come out the same); every version saved before the
    first of those (uploads, ``user:`` artifacts, the app's own files) is restored up front, so
    tools and ``load_artifacts`` see the recorded bytes.
    """
    produced: dict[str, int] = {}
    for event in recording.events:
        if event.author == agent_name:
            for filename, version in event.actions.artifact_delta.items():
                produced[filename] = min(version, produced.get(filename, version))
    for artifact in recording.artifacts:
        if artifact.version >= produced.get(artifact.filename, artifact.version + 1):
            continue
        await store.save_artifact(
            recording.session_id, artifact.filename, artifact.data, mime_type=artifact.mime_type
        )


def _missing(events: Sequence[Event], produced: int) -> ReplayDivergence:
    return ReplayDivergence(
        seq=produced + 1,
        field="",
        expected=_summary(events[produced]),
        actual=None,
        detail="Today's code stopped before producing this recorded event.",
    )


async def _drive(
    runner: Runner, store: EventStore, recording: Recording, model: RecordedModel
) -> ReplayResult:
    events, sid, agent = recording.events, recording.session_id, runner.agent.name
    ids = _Ids()
    index = 0
    try:
        while index < len(events):
            inputs: list[Event] = []
            while index < len(events) and events[index].author != agent:
                inputs.append(ids.rewrite(events[index], ids.to_actual))
                index += 1
            has_output = index < len(events)
            last = inputs[-1] if inputs else None
            message = None
            if has_output and last is not None and last.author == "user" and last.content:
                message = last.content
                inputs.pop()
            if inputs:
                await store.append(
                    sid,
                    [dataclasses.replace(e, seq=None) for e in inputs],
                    expected_version=await store.version(sid),
                )
            before = await store.version(sid)
            if has_output:
                await runner.run(session_id=sid, user_id=recording.user_id, new_message=message)
            actual = await store.read(sid)
            _check(events, actual, ids)
            if has_output and len(actual) == before:
                raise _missing(events, len(actual))
            index = len(actual)
    except ReplayDivergence as exc:
        if exc.seq:
            raise
        _check(events, await store.read(sid), ids)  # the log's first difference explains it best
        raise
    actual = await store.read(sid)
    if len(actual) < len(events):
        raise _missing(events, len(actual))
    return ReplayResult(events=tuple(actual), model_calls=model.calls)
