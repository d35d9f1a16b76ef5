"""load_artifacts in two steps: listed, requested, attached to the next request only."""

from __future__ import annotations

import contextlib

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    ModelResponse,
    Runner,
    ScriptedModel,
    ScriptExhaustedError,
    default_request_processors,
)
from runtime.replay import LoadArtifactsProcessor, LoadArtifactsTool, ReplayResumePlanner

AGENT = "analyst"


def _runner(store: EventStore, model: ScriptedModel) -> Runner:
    agent = Agent(name=AGENT, model=model, tools=[LoadArtifactsTool()])
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


async def test_artifacts_survive_a_restart_between_the_two_steps(store: EventStore) -> None:
    first = ScriptedModel([_load("report.txt")])
    runner = _runner(store, first)
    await runner.create_session(user_id="u", session_id="s")
    await store.save_artifact("s", "report.txt", b"Q3 revenue: 42", mime_type="text/plain")
    # the process "dies" after the tool answered, before the next model call
    with contextlib.suppress(ScriptExhaustedError):
        await runner.run(session_id="s", user_id="u", new_message="Summarize")

    second = ScriptedModel(["It says 42."])
    resumed = await _runner(store, second).run(session_id="s", user_id="u")
    assert resumed.final_text == "It says 42."
    assert "Q3 revenue: 42" in _texts(second, 0)


async def test_artifacts_none_means_no_instruction(store: EventStore) -> None:
    model = ScriptedModel(["Nothing to read."])
    runner = _runner(store, model)
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="hi")
    assert model.requests[0].instructions == []
