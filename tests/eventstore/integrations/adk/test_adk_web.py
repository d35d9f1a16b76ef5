"""``evs web`` on a session ADK's Runner wrote through ``EventStoreDurabilityPlugin``: the
timeline pairs calls with their responses, the pending page lists ADK's confirmation, and
approving it with the page's form (signed in, CSRF, same origin) lets the resumed invocation
(ADK's Resume) ship once and answer."""

from __future__ import annotations

from _extras import require_extra

require_extra("google.adk", "adk")
require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from pathlib import Path  # noqa: E402

from _durable_shop import APP, FINAL, USER, World, build_runner, final_text, run  # noqa: E402
from _web_client import answer_forms, answer_pending, client, text_of  # noqa: E402

from eventstore.integrations.adk import EventStoreSessionService  # noqa: E402


async def test_adk_confirmation_in_evs_web_lets_the_resumed_invocation_ship_once(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "web.db")
    service, world = EventStoreSessionService(db), World()
    await service.create_session(app_name=APP, user_id=USER, session_id="s")
    runner = build_runner(service, world)
    await run(runner, "s", text="Buy the book.")
    http, config = client(db, writes=True)
    with http:
        timeline = text_of(http.get("/s/s").text)
        assert "lookup_price" in timeline
        assert timeline.count("answered at #") >= 2  # lookup_price and charge_card
        assert "confirm ship_order" in timeline
        assert "approved" in answer_pending(http, config, "s",
                                            expect="confirmation: ship_order", action="approve")
    session = await service.get_session(app_name=APP, user_id=USER, session_id="s")
    assert session is not None
    invocation = next(e.invocation_id for e in session.events if e.author == "user")
    await run(runner, "s", invocation_id=invocation)
    done = await service.get_session(app_name=APP, user_id=USER, session_id="s")
    assert done is not None
    assert final_text(done) == FINAL
    assert dict(world.runs) == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    with http:
        finished = http.get("/pending/s").text
        assert "Nothing is pending." in finished
        assert answer_forms(finished) == []
    await runner.close()
    await service.close()
