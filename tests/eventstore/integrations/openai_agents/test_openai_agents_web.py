"""``evs web`` on an ``EventStoreRunner`` session: the timeline pairs the run's calls with
their outputs, the pending page lists the ``needs_approval`` interruption, approving it with
the page's form (signed in, CSRF, same origin) lets the next ``EventStoreRunner.run`` ship
once, and the completed run leaves nothing pending."""

from __future__ import annotations

from _extras import require_extra

require_extra("agents", "openai-agents")
require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from _oai_order_agent import FINAL, OrderModel, Shop  # noqa: E402
from _web_client import answer_forms, answer_pending, client, text_of  # noqa: E402
from agents import set_tracing_disabled  # noqa: E402

from eventstore.integrations.openai_agents import EventStoreRunner, EventStoreSession  # noqa: E402

ASK = "Buy the book and ship it."


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


async def _run(shop: Shop, model: OrderModel, db: str) -> object:
    session = EventStoreSession("o1", db, app_name="shop", user_id="ada")
    try:
        return await EventStoreRunner.run(shop.agent(model), ASK, session=session)
    finally:
        session.close()


async def test_openai_agents_approval_in_evs_web_lets_the_next_run_ship_once(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "web.db")
    shop, model = Shop(), OrderModel()
    first = await _run(shop, model, db)
    assert [i.tool_name for i in first.interruptions] == ["ship_order"]  # type: ignore[attr-defined]
    http, config = client(db, writes=True)
    with http:
        timeline = text_of(http.get("/s/o1").text)
        assert "lookup_price" in timeline
        assert "answered at #5" in timeline
        assert "awaiting confirmation" in timeline
        assert "confirm ship_order" in timeline
        # The SDK's session items read as what they are, paired with the run's calls.
        assert "session item → lookup_price" in timeline
        assert "the framework's copy of call #3" in timeline
        assert "openai_agents_run" not in timeline
        assert "approved" in answer_pending(http, config, "o1",
                                            expect="confirmation: ship_order", action="approve")
    done = await _run(shop, model, db)
    assert done.final_output == FINAL  # type: ignore[attr-defined]
    assert shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    with http:
        finished = http.get("/pending/o1").text
        assert "Nothing is pending." in finished
        assert answer_forms(finished) == []
        assert "The agent gave its final answer" in text_of(finished)
