"""``evs mcp-server``'s tools address sessions by (app, user, id): two users of one app each
hold ``s1``; the bare id is an error listing both, ``app``/``user`` pick each one (the SDK's
client connected in-process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _extras import require_extra

require_extra("mcp", "mcp")

from mcp import Client  # noqa: E402

from eventstore import Content, Event, EventActions, Part, open_store  # noqa: E402
from runtime.mcp._evs_server import build_evs_server  # noqa: E402


async def test_evs_mcp_tools_take_app_and_user(tmp_path: Path) -> None:
    db = str(tmp_path / "users.db")
    async with await open_store(db, auto_upgrade=True) as store:
        for user in ("ada", "bob"):
            await store.create_session(app_name="weather", user_id=user, session_id="s1",
                                       events=[Event(author="user", content=Content(
                                           role="user", parts=(Part(text=f"hi {user}"),)),
                                           actions=EventActions(state_delta={"who": user}))])
    async with (
        await open_store(db, read_only=True) as store,
        Client(build_evs_server(store, db=db)) as client,
    ):
        for name in ("show", "state", "pending", "verify"):
            refused = await client.call_tool(name, {"session_id": "s1"})
            assert refused.is_error, name
            message = refused.content[0].text
            assert "Session id 's1' is held by 2 sessions" in message
            assert "app 'weather' user 'ada'" in message
            assert "app 'weather' user 'bob'" in message
            assert "pass app and user" in message
        for user in ("ada", "bob"):
            where: dict[str, Any] = {"session_id": "s1", "app": "weather", "user": user}
            for name in ("show", "state", "pending", "verify"):
                done = await client.call_tool(name, where)
                assert not done.is_error, (name, done.content)
            shown = (await client.call_tool("show", where)).structured_content
            assert shown is not None
            assert shown["session"]["user_id"] == user
            state = (await client.call_tool("state", where)).structured_content
            assert state is not None
            assert state["state"] == {"who": user}
