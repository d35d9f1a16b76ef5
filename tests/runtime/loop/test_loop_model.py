"""ModelResponse and ScriptedModel."""

from __future__ import annotations

from eventstore import Content, EventStore, FunctionCall, Part
from runtime import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel


def test_model_response_assigns_missing_call_ids_and_keeps_given_ones() -> None:
    response = ModelResponse.calling(("a", {"x": 1}), FunctionCall(id="mine", name="b", args={}))
    first, second = response.function_calls
    assert first.id.startswith("call-")
    assert first.args == {"x": 1}
    assert second.id == "mine"
    assert ModelResponse.from_content(response.content()) == response


def test_model_response_keeps_the_models_ids_even_when_they_repeat() -> None:
    # Servers that number each response's calls (call_0, call_1 ...) may repeat an id; the
    # runner, not the response, makes stored ids unique (test_loop_call_ids.py).
    response = ModelResponse.calling(
        FunctionCall(id="x", name="a", args={}), FunctionCall(id="x", name="b", args={})
    )
    assert [c.id for c in response.function_calls] == ["x", "x"]


async def test_scripted_model_accepts_text_responses_and_functions() -> None:
    def echo(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=f"{len(request.contents)} contents")

    async def later(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="async")

    model = ScriptedModel(["plain", echo, later])
    request = ModelRequest(contents=[Content(role="user", parts=(Part(text="hi"),))])
    assert (await model.generate(request)).text == "plain"
    request.contents.append(Content(role="user", parts=(Part(text="again"),)))
    assert (await model.generate(request)).text == "2 contents"
    assert (await model.generate(request)).text == "async"
    assert [len(r.contents) for r in model.requests] == [1, 2, 2]
    assert model.remaining == 0


async def test_an_empty_model_turn_is_a_final_answer(store: EventStore) -> None:
    runner = Runner(
        agent=Agent(name="agent", model=ScriptedModel([ModelResponse()])),
        store=store,
        app_name="app",
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="say nothing")
    assert result.status == "completed"
    assert result.final_text == ""
    assert result.events[-1].content == Content(role="model", parts=())
