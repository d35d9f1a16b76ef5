"""load_memory and preload_memory in the real loop: past sessions of the same user only."""

from __future__ import annotations

from pathlib import Path

from eventstore import EventStore, FunctionCall, MemoryService, open_store
from runtime import (
    Agent,
    LoadMemoryTool,
    ModelResponse,
    PreloadMemoryTool,
    Runner,
    ScriptedModel,
)


async def _remember(store: EventStore, memory: MemoryService, user: str, text: str) -> None:
    runner = Runner(
        agent=Agent(name="planner", model=ScriptedModel(["Noted."])), store=store, app_name="trips"
    )
    session = await runner.create_session(user_id=user)
    await runner.run(session_id=session.id, user_id=user, new_message=text)
    await memory.add_session_to_memory(session.id)


async def test_load_memory_answers_from_the_users_past_sessions(tmp_path: Path) -> None:
    async with await open_store(tmp_path / "m.db", auto_upgrade=True) as store:
        memory = MemoryService(store)
        await _remember(store, memory, "ada", "I always travel with my dog Biscuit")
        await _remember(store, memory, "bob", "my dog Rex hates trains")
        model = ScriptedModel(
            [
                ModelResponse.calling(
                    FunctionCall(id="m1", name="load_memory", args={"query": "dog"})
                ),
                "Bring Biscuit's leash.",
            ]
        )
        agent = Agent(name="planner", model=model, tools=[LoadMemoryTool(memory)])
        runner = Runner(agent=agent, store=store, app_name="trips")
        await runner.create_session(user_id="ada", session_id="now")
        result = await runner.run(session_id="now", user_id="ada", new_message="What to pack?")

        assert result.final_text == "Bring Biscuit's leash."
        stored = await store.read("now")
        (answer,) = stored[3].function_responses()
        memories = answer.response["memories"]
        assert [m["text"] for m in memories] == ["I always travel with my dog Biscuit"]
        assert memories[0]["author"] == "user"
        assert memories[0]["seq"] == 1
        assert "Rex" not in str(stored)  # bob's memory never reaches ada's session
        assert [d.name for d in model.requests[0].declarations] == ["load_memory"]


async def test_preload_memory_adds_relevant_memories_to_each_request(tmp_path: Path) -> None:
    async with await open_store(tmp_path / "m.db", auto_upgrade=True) as store:
        memory = MemoryService(store)
        await _remember(store, memory, "ada", "I prefer window seats on trains")
        await _remember(store, memory, "bob", "I prefer aisle seats on trains")
        model = ScriptedModel(["Window seat booked.", "Nothing found."])
        agent = Agent(name="planner", model=model, tools=[PreloadMemoryTool(memory)])
        runner = Runner(agent=agent, store=store, app_name="trips")
        await runner.create_session(user_id="ada", session_id="now")

        await runner.run(session_id="now", user_id="ada", new_message="Book me a train seat")
        await runner.run(session_id="now", user_id="ada", new_message="zeppelin?")

        first, second = model.requests
        (preloaded,) = first.instructions
        assert "<PAST_CONVERSATIONS>" in preloaded
        assert "user: I prefer window seats on trains" in preloaded
        assert "aisle" not in preloaded
        # the current session is not remembered; nothing matches "zeppelin"
        assert second.instructions == []
        assert first.declarations == []
        stored = await store.read("now")
        assert all("PAST_CONVERSATIONS" not in e.text() for e in stored)
