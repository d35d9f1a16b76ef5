"""load_artifacts in two steps: listed, requested, attached to the next request only."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from eventstore import EventStore, FunctionCall, open_store
from runtime import (
    Agent,
    AgentCallbacks,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    ScriptExhaustedError,
    Tool,
    ToolContext,
    default_request_processors,
)
from runtime.replay import LoadArtifactsProcessor, LoadArtifactsTool, ReplayResumePlanner

AGENT = "analyst"


def _runner(
    store: EventStore, model: ScriptedModel, callbacks: AgentCallbacks | None = None
) -> Runner:
    agent = Agent(
        name=AGENT,
        model=model,
        tools=[LoadArtifactsTool()],
        callbacks=callbacks if callbacks is not None else AgentCallbacks(),
    )
    return Runner(
        agent=agent,
        store=store,
        app_name="files",
        request_processors=[*default_request_processors(), LoadArtifactsProcessor()],
        resume_planner=ReplayResumePlanner(),
    )


def _load(*names: str) -> ModelResponse:
    return ModelResponse(
        function_calls=(
            FunctionCall(
                id="call-load", name="load_artifacts", args={"artifact_names": list(names)}
            ),
        )
    )


def _texts(model: ScriptedModel, request: int) -> str:
    return "\n".join(
        p.text for c in model.requests[request].contents for p in c.parts if p.text is not None
    )


async def test_artifacts_listed_loaded_into_next_request_only(store: EventStore) -> None:
    model = ScriptedModel([_load("report.txt", "chart.png", "ghost.txt"), "Read it.", "Bye."])
    runner = _runner(store, model)
    await runner.create_session(user_id="u", session_id="s")
    await store.save_artifact("s", "report.txt", b"Q3 revenue: 42", mime_type="text/plain")
    await store.save_artifact("s", "chart.png", b"\x89PNG...", mime_type="image/png")

    result = await runner.run(session_id="s", user_id="u", new_message="Summarize the report")
    assert result.status == "completed"
    assert any("report.txt" in i and "chart.png" in i for i in model.requests[0].instructions)
    assert "Q3 revenue" not in _texts(model, 0)

    (response,) = result.events[3].function_responses()
    assert response.response["artifact_names"] == ["report.txt", "chart.png"]
    assert response.response["artifact_versions"] == {"report.txt": 0, "chart.png": 0}
    assert response.response["missing"] == ["ghost.txt"]
    assert "ghost.txt" in response.response["message"]

    attached = model.requests[1].contents[-1]
    assert attached.role == "user"
    assert "Artifact report.txt (version 0, text/plain):\nQ3 revenue: 42" in _texts(model, 1)
    refs = [p.artifact for p in attached.parts if p.artifact is not None]
    assert [(r.filename, r.version, r.mime_type) for r in refs] == [("chart.png", 0, "image/png")]

    await runner.run(session_id="s", user_id="u", new_message="Thanks")
    assert "Q3 revenue" not in _texts(model, 2)  # that request only
    logged = (await store.get_session("s")).events
    assert all("Q3 revenue" not in e.text() for e in logged)  # never copied to the log


async def test_artifacts_survive_a_restart_between_the_two_steps(tmp_path: Path) -> None:
    path = tmp_path / "restart.db"
    first_store = await open_store(path, auto_upgrade=True)
    async with first_store:
        first = ScriptedModel([_load("report.txt")])
        runner = _runner(first_store, first)
        await runner.create_session(user_id="u", session_id="s")
        await first_store.save_artifact(
            "s", "report.txt", b"Q3 revenue: 42", mime_type="text/plain"
        )
        # the process "dies" after the tool answered, before the next model call
        with contextlib.suppress(ScriptExhaustedError):
            await runner.run(session_id="s", user_id="u", new_message="Summarize")

    # A new store object on the same file: nothing survives but the database.
    second_store = await open_store(path, auto_upgrade=True)
    async with second_store:
        await second_store.save_artifact(
            "s", "report.txt", b"Q3 revenue: 99", mime_type="text/plain"
        )
        second = ScriptedModel(["It says 42."])
        resumed = await _runner(second_store, second).run(session_id="s", user_id="u")
        assert resumed.final_text == "It says 42."
        assert "Q3 revenue: 42" in _texts(second, 0)
        assert "Q3 revenue: 99" not in _texts(second, 0)


def _saves_a_newer_version(store: EventStore) -> AgentCallbacks:
    async def after_tool(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> None:
        if tool.name == "load_artifacts":
            await store.save_artifact("s", "report.txt", b"Q4 revenue: 7", mime_type="text/plain")

    return AgentCallbacks(after_tool=(after_tool,))


def _contents(request: ModelRequest) -> object:
    return request.contents


async def test_artifacts_a_save_after_the_load_does_not_change_the_next_request(
    store: EventStore,
) -> None:
    model = ScriptedModel([_load("report.txt"), "It says 42."])
    runner = _runner(store, model, _saves_a_newer_version(store))
    await runner.create_session(user_id="u", session_id="s")
    await store.save_artifact("s", "report.txt", b"Q3 revenue: 42", mime_type="text/plain")

    result = await runner.run(session_id="s", user_id="u", new_message="Summarize")
    (response,) = result.events[3].function_responses()
    assert response.response["artifact_versions"] == {"report.txt": 0}
    assert "Artifact report.txt (version 0, text/plain):\nQ3 revenue: 42" in _texts(model, 1)
    assert "Q4 revenue" not in _texts(model, 1)

    # Rebuilding that request later (another save meanwhile) gives the same contents.
    await store.save_artifact("s", "report.txt", b"Q5 revenue: 1", mime_type="text/plain")
    rebuilt = _runner(store, ScriptedModel([]))
    ctx = InvocationContext(
        store=store,
        session_id="s",
        app_name="files",
        user_id="u",
        agent=rebuilt.agent,
        version=result.events[3].seq or 0,
    )
    assert _contents(await rebuilt.build_request(ctx)) == _contents(model.requests[1])


async def test_artifacts_the_recorded_version_is_loaded_across_a_store_reopen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reopen.db"
    first_store = await open_store(path, auto_upgrade=True)
    async with first_store:
        model = ScriptedModel([_load("report.txt"), "It says 42."])
        runner = _runner(first_store, model, _saves_a_newer_version(first_store))
        await runner.create_session(user_id="u", session_id="s")
        await first_store.save_artifact(
            "s", "report.txt", b"Q3 revenue: 42", mime_type="text/plain"
        )
        result = await runner.run(session_id="s", user_id="u", new_message="Summarize")
        sent = model.requests[1]
    version = result.events[3].seq or 0

    second_store = await open_store(path, auto_upgrade=True)
    async with second_store:
        rebuilt = _runner(second_store, ScriptedModel([]))
        ctx = InvocationContext(
            store=second_store,
            session_id="s",
            app_name="files",
            user_id="u",
            agent=rebuilt.agent,
            version=version,
        )
        assert _contents(await rebuilt.build_request(ctx)) == _contents(sent)
        assert "Q3 revenue: 42" in str(sent.contents[-1])


async def test_artifacts_none_means_no_instruction(store: EventStore) -> None:
    model = ScriptedModel(["Nothing to read."])
    runner = _runner(store, model)
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="hi")
    assert model.requests[0].instructions == []


def test_artifacts_scan_reads_recorded_versions_and_legacy_names() -> None:
    from eventstore import Content, Event, FunctionResponse, Part
    from runtime.replay import requested_artifacts

    def answered(response: dict[str, Any]) -> Event:
        part = Part(
            function_response=FunctionResponse(id="c", name="load_artifacts", response=response)
        )
        return Event(author=AGENT, content=Content(role="user", parts=(part,)))

    versioned = answered({"artifact_names": ["a"], "artifact_versions": {"a": 3}})
    assert requested_artifacts([versioned], agent_name=AGENT) == {"a": 3}
    legacy = answered({"artifact_names": ["a"]})  # written before versions were recorded
    assert requested_artifacts([legacy], agent_name=AGENT) == {"a": None}
