"""Newest-first scans of an invocation reuse the events it already read."""

from __future__ import annotations

from eventstore import EventStore, MemoryBackend, StoredEvent
from runtime import Agent, ModelResponse, Runner, ScriptedModel, function_tool


class CountingBackend(MemoryBackend):
    """A memory backend that counts event reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def read(self, session_id: str, **window: object) -> list[StoredEvent]:  # type: ignore[override]
        self.reads += 1
        return await super().read(session_id, **window)  # type: ignore[arg-type]


@function_tool
def ping() -> str:
    """Answer pong."""
    return "pong"


async def test_scans_after_the_history_was_read_cost_no_store_read() -> None:
    backend = CountingBackend()
    store = EventStore(backend)
    runner = Runner(
        agent=Agent(name="a", model=ScriptedModel([ModelResponse.calling(("ping", {})), "ok"]),
                    tools=(ping,)),
        store=store,
        app_name="app",
    )
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="hi")
    ctx = await runner.new_context(session_id="s", user_id="u")
    events = await ctx.events()
    before = backend.reads
    scanned = [e async for e in ctx.events_newest_first()]
    assert backend.reads == before
    assert [e.seq for e in scanned] == [e.seq for e in reversed(events)]


async def test_scans_before_the_history_was_read_page_from_the_store() -> None:
    backend = CountingBackend()
    store = EventStore(backend)
    runner = Runner(
        agent=Agent(name="a", model=ScriptedModel(["ok"]), tools=(ping,)),
        store=store,
        app_name="app",
    )
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="hi")
    ctx = await runner.new_context(session_id="s", user_id="u")
    before = backend.reads
    seqs = []
    async for event in ctx.events_newest_first():
        seqs.append(event.seq)
        break
    assert backend.reads > before
    assert seqs == [await store.version("s")]
