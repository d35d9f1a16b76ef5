"""Replaying recorded sessions: a faithful replay passes, any divergence names its first event."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from eventstore import EventStore, FunctionCall, open_store
from runtime import (
    Agent,
    AgentRuntimeError,
    LoadArtifactsProcessor,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    default_request_processors,
    function_tool,
)
from runtime.cli import app
from runtime.cli._demo_agent import demo_runner
from runtime.replay import ReplayResumePlanner, answer_confirmation
from runtime.testing import (
    Recording,
    RecordingError,
    ReplayDivergence,
    dump_recording,
    load_recording,
    replay_recording,
)

AGENT = "weather_agent"


def make_agent(temperature: int = 22, *, confirm: bool = True, model: Any = None) -> Agent:
    @function_tool(requires_confirmation=confirm)
    def paid_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """Paid weather lookup.

        Args:
            city: The city name.
        """
        tool_context.state["last_city"] = city
        return {"city": city, "temperature_c": temperature}

    return Agent(name=AGENT, model=model or ScriptedModel([]), tools=[paid_weather])


async def record(tmp_path: Path) -> Path:
    model = ScriptedModel(
        [
            ModelResponse(
                function_calls=(
                    FunctionCall(id="call-1", name="paid_weather", args={"city": "Tokyo"}),
                )
            ),
            "Tokyo is 22°C.",
        ]
    )
    async with await open_store(tmp_path / "rec.db", auto_upgrade=True) as store:
        runner = Runner(
            agent=make_agent(model=model),
            store=store,
            app_name="weather",
            resume_planner=ReplayResumePlanner(),
        )
        await runner.create_session(user_id="u", session_id="s1")
        paused = await runner.run(session_id="s1", user_id="u", new_message="Tokyo, paid")
        await answer_confirmation(
            store, session_id="s1", confirmation_id=paused.pending_call_ids[0], confirmed=True
        )
        await runner.run(session_id="s1", user_id="u")
        events = (await store.get_session("s1")).events
    path = tmp_path / "s1.jsonl"
    path.write_bytes(
        dump_recording(
            Recording(app_name="weather", user_id="u", session_id="s1", events=tuple(events))
        )
    )
    return path


async def test_replay_faithful_run_matches(tmp_path: Path) -> None:
    recording = load_recording(await record(tmp_path))
    assert len(recording.events) == 9
    result = await replay_recording(recording, agent=make_agent())
    assert result.model_calls == 2
    assert len(result.events) == 9


async def test_replay_changed_tool_result_names_first_differing_field(tmp_path: Path) -> None:
    recording = load_recording(await record(tmp_path))
    with pytest.raises(ReplayDivergence) as raised:
        await replay_recording(recording, agent=make_agent(temperature=30))
    error = raised.value
    assert error.seq == 8
    assert error.field == "content.parts[0].function_response.response.temperature_c"
    assert (error.expected, error.actual) == (22, 30)
    assert "seq 8" in str(error)
    assert "expected: 22" in str(error)


async def test_replay_changed_confirmation_policy_diverges_at_the_response(
    tmp_path: Path,
) -> None:
    recording = load_recording(await record(tmp_path))
    with pytest.raises(ReplayDivergence) as raised:
        await replay_recording(recording, agent=make_agent(confirm=False))
    assert raised.value.seq == 4
    assert raised.value.field.startswith("content.parts[0].function_response.response")


async def test_replay_stubbed_tools_answer_from_the_recording(tmp_path: Path) -> None:
    recording = load_recording(await record(tmp_path))
    result = await replay_recording(recording, agent=make_agent(temperature=99), stub_tools=True)
    assert len(result.events) == 9


async def test_replay_reads_evs_export_format(tmp_path: Path, store: EventStore) -> None:
    path = await record(tmp_path)
    header = path.read_bytes().splitlines()[0]
    assert b'"format":"agent-eventstore/session"' in header
    recording = load_recording(path.read_bytes())
    assert (recording.app_name, recording.session_id) == ("weather", "s1")
    assert [e.seq for e in recording.events] == list(range(1, 10))


def test_replay_bad_line_is_named() -> None:
    with pytest.raises(RecordingError, match="Line 2 of the recording") as raised:
        load_recording(b'{"author": "user"}\n{"author": 3}\n')
    assert raised.value.line == 2
    assert isinstance(raised.value, ValueError)  # bad input, for callers that catch ValueError
    assert isinstance(raised.value, AgentRuntimeError)


def _export_demo_session(db: Path) -> bytes:
    """What ``evs demo --approve`` then ``evs export`` write (the full CLI, in this process: a
    subprocess per command would cost a second of CPU each in imports)."""
    runner = CliRunner()

    def evs(*args: str) -> bytes:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout_bytes

    evs("demo", "--approve", "--db", str(db))
    [session] = orjson.loads(evs("sessions", "--db", str(db), "--json"))["sessions"]
    return evs("export", session["id"], "--db", str(db))


async def test_replay_recording_of_an_evs_export_with_artifacts(tmp_path: Path) -> None:
    """The README's demo session saves an artifact; its export replays, artifacts included."""
    exported = await asyncio.to_thread(_export_demo_session, tmp_path / "demo.db")
    recording = load_recording(exported)
    assert [a.filename for a in recording.artifacts] == ["paris-forecast.md"]
    assert load_recording(dump_recording(recording)) == recording

    async with await open_store("memory://") as scratch:
        agent = demo_runner(scratch, [], app_name="x").agent
    processors = [*default_request_processors(), LoadArtifactsProcessor()]
    result = await replay_recording(recording, agent=agent, request_processors=processors)
    assert len(result.events) == len(recording.events)
