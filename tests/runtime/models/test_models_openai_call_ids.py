"""A server that numbers calls per response (``call_0`` on every turn), on the OpenAI wire.

vLLM, llama.cpp and some proxies give the calls of each response the ids ``call_0``,
``call_1`` …, so ids repeat across turns and, here, even within one response. The log must keep
call ids unique (every reader pairs by them) while the server is sent back exactly the ids it
gave.
"""

from __future__ import annotations

import pytest
from _extras import require_extra

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

require_extra("openai", "openai")

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402
from _wire import (  # noqa: E402
    APP,
    QUESTION,
    USER,
    WEATHER_SHAPE,
    Wire,
    fixture,
    shape,
    sse,
    weather_session,
)

from eventstore import Event, open_store  # noqa: E402
from runtime import PROVIDER_CALL_IDS_KEY  # noqa: E402
from runtime.cli._demo_agent import demo_runner  # noqa: E402
from runtime.models import OpenAIChatModel  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from _cli_support import evs_subprocess  # noqa: E402

PATH = "/v1/chat/completions"
HERE = Path(__file__).resolve().parent


def model(wire: Wire) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", api_key="sk-test", base_url=wire.url("/v1"),
                           max_retries=0)


def call_zero(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply with every tool call's id replaced by ``call_0``."""
    reply = orjson.loads(orjson.dumps(reply))
    for call in reply["choices"][0]["message"].get("tool_calls") or ():
        call["id"] = "call_0"
    return reply


def call_zero_replies() -> list[dict[str, Any]]:
    return [call_zero(reply) for reply in fixture("openai_weather.json")]


def with_call_zero(bodies: Any) -> Any:
    """The golden request bodies of the weather session with every call id ``call_0``."""
    for body in bodies:
        for message in body["messages"]:
            for call in message.get("tool_calls") or ():
                call["id"] = "call_0"
            if "tool_call_id" in message:
                message["tool_call_id"] = "call_0"
    return bodies


def stored_calls(history: list[Event]) -> list[tuple[str, str]]:
    """``(id, name)`` of every function call in the log, oldest first."""
    return [(c.id, c.name) for e in history for c in e.function_calls()]


async def test_call_zero_every_turn_stores_unique_ids_and_sends_the_servers_back(
    tmp_path: Path, wire: Wire
) -> None:
    db = tmp_path / "s.db"
    history, results = await weather_session(
        db, wire, PATH, call_zero_replies(), lambda: model(wire)
    )
    # The whole protocol ran as with distinct ids: parallel calls, the confirmation answered
    # from another store object, the resume, the long-running result, load_artifacts.
    assert shape(history) == WEATHER_SHAPE
    ids = [call_id for call_id, _ in stored_calls(history)]
    assert len(ids) == len(set(ids)), ids
    # The first call keeps the server's id; every later call_0 got a fresh one, recorded.
    first = history[1]
    kept, renamed = (c.id for c in first.function_calls())
    assert kept == "call_0"
    assert renamed != "call_0"
    assert first.custom_metadata[PROVIDER_CALL_IDS_KEY] == {renamed: "call_0"}
    for event in history[2:]:
        model_calls = [c for c in event.function_calls() if c.name != "adk_request_confirmation"]
        if event.content is not None and event.content.role == "model" and model_calls:
            assert event.custom_metadata[PROVIDER_CALL_IDS_KEY] == {
                c.id: "call_0" for c in model_calls
            }
    # The responses answer the right calls: Paris's weather, then Atlantis's error.
    paris, atlantis = history[3].function_responses()
    assert [paris.id, atlantis.id] == [c.id for c in first.function_calls()]
    assert paris.response["city"] == "Paris"
    assert atlantis.response["error"]["kind"] == "execution_failed"

    # The server got back exactly the requests of the run with distinct ids, with its own ids.
    golden = orjson.loads((HERE / "golden" / "openai_weather_requests.json").read_bytes())
    assert wire.bodies == with_call_zero(golden)
    assert results[-1].final_text.startswith("Paris: 22°C")

    verified = evs_subprocess("verify", "s", "--db", str(db))
    assert verified.returncode == 0, verified.stdout + verified.stderr


async def test_call_zero_confirmation_answered_by_evs_in_another_process(
    tmp_path: Path, wire: Wire
) -> None:
    db = tmp_path / "s.db"
    replies = call_zero_replies()
    wire.reply(PATH, replies[0])
    wire.reply(PATH, replies[1])
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = demo_runner(store, [], app_name=APP, model=model(wire))
        first = await runner.run(session_id="s", user_id=USER, new_message=QUESTION)
    assert first.status == "paused_for_confirmation", first
    [confirmation_id] = first.pending_call_ids

    # The second call_0 (paid_forecast) waits for its confirmation, and evs sees it.
    pending = evs_subprocess("pending", "s", "--db", str(db), "--json")
    assert pending.returncode == 0, pending.stderr
    [waiting] = json.loads(pending.stdout)["pending"]
    async with await open_store(db) as store:
        [forecast] = [c for c in (await store.read("s"))[4].function_calls()]
    assert forecast.name == "paid_forecast"
    assert forecast.id != "call_0"
    assert (waiting["kind"], waiting["confirmation_id"], waiting["call_id"], waiting["tool"]) == (
        "confirmation", confirmation_id, forecast.id, "paid_forecast"
    )
    confirmed = evs_subprocess("confirm", "s", confirmation_id, "--yes", "--db", str(db))
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr

    wire.reply(PATH, replies[2])
    async with await open_store(db) as store:
        runner = demo_runner(store, [], app_name=APP, model=model(wire))
        second = await runner.run(session_id="s", user_id=USER)
        history = await store.read("s")
    assert second.status == "paused_long_running", second
    [result] = [
        r for e in history for r in e.function_responses()
        if r.id == forecast.id and "report" in r.response
    ]
    assert result.response["days"] == 7
    # The server saw the confirmed result under its own id, right after its call.
    tail = wire.bodies[2]["messages"][-2:]
    assert [c["id"] for c in tail[0]["tool_calls"]] == ["call_0"]
    assert tail[1]["tool_call_id"] == "call_0"
    assert json.loads(tail[1]["content"])["report"] == "paris-forecast.md"

    shown = evs_subprocess("show", "s", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    # The timeline pairs the forecast (seq 5) with its confirmed result (seq 11), not with
    # the first call_0's.
    lines = shown.stdout.splitlines()
    [call_line] = [line for line in lines if line.strip().startswith("→ paid_forecast")]
    assert f"[{forecast.id}, the model's id call_0]  answered at #11" in call_line
    [answer_line] = [line for line in lines if '"report":"paris-forecast.md"' in line]
    assert f"[{forecast.id}] (call #5)" in answer_line
    verified = evs_subprocess("verify", "s", "--db", str(db))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1767000000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _call_fragment(index: int, city: str) -> dict[str, Any]:
    return {"index": index, "id": "call_0", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


async def test_call_zero_twice_in_one_streamed_turn(tmp_path: Path, wire: Wire) -> None:
    wire.stream(PATH, sse(
        (None, _chunk({"role": "assistant", "tool_calls": [_call_fragment(0, "Paris")]})),
        (None, _chunk({"tool_calls": [_call_fragment(1, "Oslo")]})),
        (None, _chunk({}, "tool_calls")),
        (None, "[DONE]"),
    ))
    wire.stream(PATH, sse(
        (None, _chunk({"role": "assistant", "content": "Sunny in both."})),
        (None, _chunk({}, "stop")),
        (None, "[DONE]"),
    ))
    async with await open_store(tmp_path / "s.db", auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = demo_runner(store, [], app_name=APP, model=model(wire))
        stored = [e async for e in runner.run_events(
            session_id="s", user_id=USER, new_message="Paris and Oslo?", stream_text=True
        ) if not e.partial]
        assert await store.read("s") == stored
    calls = stored[1].function_calls()
    assert calls[0].id == "call_0"
    assert calls[1].id != "call_0"
    assert stored[1].custom_metadata[PROVIDER_CALL_IDS_KEY] == {calls[1].id: "call_0"}
    answers = {r.id: r.response["city"] for r in stored[3].function_responses()}
    assert answers == {calls[0].id: "Paris", calls[1].id: "Oslo"}
    assert stored[-1].text() == "Sunny in both."
    sent = wire.bodies[1]["messages"][-3:]
    assert [c["id"] for c in sent[0]["tool_calls"]] == ["call_0", "call_0"]
    assert [(m["tool_call_id"], json.loads(m["content"])["city"]) for m in sent[1:]] == [
        ("call_0", "Paris"), ("call_0", "Oslo")
    ]
