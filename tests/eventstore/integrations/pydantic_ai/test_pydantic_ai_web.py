"""``evs web`` on ``EventStoreAgent`` sessions: the timeline pairs calls with returns, the
pending page lists an approval and a deferred call, and answering them with the page's forms
(signed in, CSRF, same origin) lets the next run continue: the approved tool runs once, the
deferred call's result is its return."""

from __future__ import annotations

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")
require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from pathlib import Path  # noqa: E402

from _pai import deferring_agent, order_agent  # noqa: E402
from _web_client import answer_forms, answer_pending, client, text_of  # noqa: E402
from pydantic_ai import DeferredToolRequests  # noqa: E402

from eventstore.integrations.pydantic_ai import EventStoreAgent  # noqa: E402


async def test_pydantic_ai_approval_in_evs_web_lets_the_next_run_ship_once(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "web.db")
    ran: list[str] = []
    agent = EventStoreAgent(order_agent(ran=ran), store=db)
    paused = await agent.run("Buy the book", session_id="s")
    assert isinstance(paused.output, DeferredToolRequests)
    http, config = client(db, writes=True)
    with http:
        timeline = text_of(http.get("/s/s").text)
        assert "lookup" in timeline
        assert "[c1] answered at #4" in timeline
        assert "[c2] answered at #8" in timeline
        assert "[c3] awaiting confirmation" in timeline
        assert "confirm ship" in timeline
        assert "hint: Approve ship?" in timeline
        assert "approved" in answer_pending(http, config, "s", expect="confirmation: ship",
                                            action="approve")
    done = await agent.run(None, session_id="s")
    assert done.output == "done: shipped book"
    assert ran == ["lookup", "charge", "ship"]
    with http:
        assert "[c3] answered at" in text_of(http.get("/s/s").text)
        finished = http.get("/pending/s").text
        assert "Nothing is pending." in finished
        assert answer_forms(finished) == []
        assert "The agent gave its final answer" in text_of(finished)
    await agent.aclose()


async def test_pydantic_ai_deferred_call_answered_in_evs_web(tmp_path: Path) -> None:
    db = str(tmp_path / "deferred.db")
    ran: list[str] = []
    agent = EventStoreAgent(deferring_agent(ran=ran), store=db)
    waiting = await agent.run("Render page 1", session_id="d")
    assert isinstance(waiting.output, DeferredToolRequests)
    http, config = client(db, writes=True)
    with http:
        timeline = text_of(http.get("/s/d").text)
        assert "[r1] pending (long-running: its result is submitted later)" in timeline
        assert "in doubt" not in timeline
        assert "recorded" in answer_pending(http, config, "d", expect="long running: render",
                                            result='{"result": "PDF"}')
    done = await agent.run(None, session_id="d")
    assert done.output == "rendered: PDF"
    assert ran == ["render"]
    await agent.aclose()
