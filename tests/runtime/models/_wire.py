"""A provider endpoint on 127.0.0.1 for the adapters' tests, and the weather session they drive.

``Wire`` queues replies (JSON bodies from the hand-written fixture files, error answers, or
server-sent events) in the order the SDK must ask for them, and records the exact JSON body of
every request. Golden files hold the bodies the tests expect; ``EVS_UPDATE_GOLDEN=1`` rewrites
them (then read the diff before committing).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from eventstore import Event, event_kind, open_store
from runtime import Agent, Model, Runner, RunResult
from runtime.cli._demo_agent import demo_runner
from runtime.replay import answer_confirmation, submit_response

HERE = Path(__file__).resolve().parent
APP = "weather"
USER = "ada"
QUESTION = "What's the weather in Paris and in Atlantis? Then the paid forecast and the outlook."
OUTLOOK = {"city": "Paris", "outlook": "warmer than usual for the next 30 days"}


def fixture(name: str) -> Any:
    """Return a hand-written provider reply (or a list of them) from ``fixtures/``."""
    return orjson.loads((HERE / "fixtures" / name).read_bytes())


def assert_golden(name: str, value: Any) -> None:
    """Assert ``value`` equals the JSON in ``golden/<name>.json`` (rewrite it when asked)."""
    path = HERE / "golden" / f"{name}.json"
    if os.environ.get("EVS_UPDATE_GOLDEN"):
        path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
    assert value == orjson.loads(path.read_bytes())


class Wire:
    """Queued replies on a local ``HTTPServer``; ``bodies`` are the requests, in order."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []

    def url(self, path: str = "") -> str:
        """Return the server's URL for ``path``."""
        return self.server.url_for(path)

    def _record(self, request: Request) -> None:
        self.bodies.append(orjson.loads(request.get_data()))
        self.paths.append(request.full_path.rstrip("?"))
        self.headers.append({k.lower(): v for k, v in request.headers.items()})

    def reply(
        self,
        path: str,
        body: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the next request to ``path`` with ``body`` as JSON."""

        def handler(request: Request) -> Response:
            self._record(request)
            return Response(
                orjson.dumps(body),
                status=status,
                headers=dict(headers or {}),
                content_type="application/json",
            )

        self.server.expect_ordered_request(path, method="POST").respond_with_handler(handler)

    def stream(
        self,
        path: str,
        events: Sequence[str],
        *,
        gate: threading.Event | None = None,
        gate_after: int = 0,
        released: list[bool] | None = None,
    ) -> None:
        """Answer the next request to ``path`` with server-sent ``events`` (each a full SSE
        record). With ``gate``, everything after event ``gate_after`` waits until the test sets it;
        ``released`` then records whether the gate opened (True) or timed out (False)."""

        def handler(request: Request) -> Response:
            self._record(request)

            def produce() -> Iterator[bytes]:
                for index, event in enumerate(events):
                    if index == gate_after + 1 and gate is not None:
                        opened = gate.wait(timeout=10)
                        if released is not None:
                            released.append(opened)
                    yield event.encode()

            return Response(produce(), content_type="text/event-stream")

        self.server.expect_ordered_request(path, method="POST").respond_with_handler(handler)


def shape(history: Sequence[Event]) -> list[tuple[str, str]]:
    """Return ``(author, kind)`` of each event, for readable history assertions."""
    return [(e.author, event_kind(e)) for e in history]


WEATHER_SHAPE = [
    ("user", "message"),
    ("weather_agent", "function_call"),  # two parallel get_weather calls
    ("weather_agent", "execution_started"),
    ("weather_agent", "function_response"),  # Paris's weather and Atlantis's structured error
    ("weather_agent", "function_call"),  # paid_forecast
    ("weather_agent", "execution_started"),
    ("weather_agent", "function_response"),  # confirmation_required
    ("weather_agent", "confirmation_request"),
    ("user", "confirmation_answer"),  # from another store object
    ("weather_agent", "execution_started"),
    ("weather_agent", "function_response"),  # the confirmed forecast
    ("weather_agent", "function_call"),  # long_range_outlook (long-running)
    ("weather_agent", "execution_started"),
    ("user", "function_response"),  # submitted later from another store object
    ("weather_agent", "function_call"),  # load_artifacts
    ("weather_agent", "execution_started"),
    ("weather_agent", "function_response"),
    ("weather_agent", "message"),  # the final answer
]


async def weather_session(
    db: Path,
    wire: Wire,
    path: str,
    replies: Sequence[Any],
    make_model: Callable[[], Model],
) -> tuple[list[Event], list[RunResult]]:
    """Drive the demo's weather agent on a real adapter through the whole protocol.

    Run 1 asks the question (parallel calls, one failing) and pauses on the paid forecast; a
    second store object approves it; run 2 (a third store object, a new model object) runs the
    forecast and pauses on the long-running outlook; another store object submits its result;
    run 3 loads the report artifact and answers. Returns the stored history and the results.
    """
    results: list[RunResult] = []
    wire.reply(path, replies[0])
    wire.reply(path, replies[1])
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = demo_runner(store, [], app_name=APP, model=make_model())
        results.append(await runner.run(session_id="s", user_id=USER, new_message=QUESTION))
    assert results[-1].status == "paused_for_confirmation", results[-1]
    assert len(wire.bodies) == 2

    async with await open_store(db) as other:
        await answer_confirmation(
            other, session_id="s", confirmation_id=results[-1].pending_call_ids[0], confirmed=True
        )
    wire.reply(path, replies[2])
    async with await open_store(db) as store:
        runner = demo_runner(store, [], app_name=APP, model=make_model())
        results.append(await runner.run(session_id="s", user_id=USER))
    assert results[-1].status == "paused_long_running", results[-1]
    assert len(wire.bodies) == 3

    async with await open_store(db) as other:
        await submit_response(
            other, session_id="s", call_id=results[-1].pending_call_ids[0], response=OUTLOOK
        )
    wire.reply(path, replies[3])
    wire.reply(path, replies[4])
    async with await open_store(db) as store:
        runner = demo_runner(store, [], app_name=APP, model=make_model())
        results.append(await runner.run(session_id="s", user_id=USER))
        history = await store.read("s")
    assert results[-1].status == "completed", results[-1]
    assert len(wire.bodies) == 5
    return history, results


def sse(*records: tuple[str | None, Any]) -> list[str]:
    """Return server-sent event records (``event:`` line when named) of JSON data."""
    out = []
    for name, data in records:
        payload = data if isinstance(data, str) else orjson.dumps(data).decode()
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return out


async def streamed_turn(
    db: Path, wire: Wire, path: str, events: Sequence[str], model: Model, *, gate_after: int = 0
) -> tuple[list[str], list[Event], list[bool]]:
    """Stream one text turn through ``Runner.run_events(stream_text=True)``.

    The server holds everything after event ``gate_after`` (the first with text) until the
    runner has yielded a partial event, so a runner that buffered the stream would time out the
    gate (``released`` False).
    Returns the partial texts, the stored events the runner yielded and the gate's record.
    """
    gate = threading.Event()
    released: list[bool] = []
    wire.stream(path, events, gate=gate, gate_after=gate_after, released=released)
    partials: list[str] = []
    stored: list[Event] = []
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = Runner(agent=Agent(name="chat", model=model), store=store, app_name=APP)
        async for event in runner.run_events(
            session_id="s", user_id=USER, new_message="Weather in Paris?", stream_text=True
        ):
            if event.partial:
                assert event.seq is None
                partials.append(event.text())
                gate.set()
            else:
                stored.append(event)
        assert await store.read("s") == stored
    return partials, stored, released


async def cancelled_stream(
    db: Path, wire: Wire, path: str, events: Sequence[str], model: Model, *, gate_after: int = 0
) -> list[Event]:
    """Stop consuming a streamed turn after its first partial event; return the stored log."""
    gate = threading.Event()
    wire.stream(path, events, gate=gate, gate_after=gate_after)
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = Runner(agent=Agent(name="chat", model=model), store=store, app_name=APP)
        seen: list[Event] = []
        async with contextlib.aclosing(
            runner.run_events(
                session_id="s", user_id=USER, new_message="Weather in Paris?", stream_text=True
            )
        ) as running:
            async for event in running:
                seen.append(event)
                if event.partial:
                    break
        gate.set()
        assert [e.partial for e in seen] == [False, True]
        return await store.read("s")


async def failed_turn(
    db: Path, model: Model, *, tools: Sequence[Any] = ()
) -> tuple[BaseException, list[Event]]:
    """Run one invocation whose model call fails; return the error and the stored log."""
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        agent = Agent(name="chat", model=model, tools=tools)
        runner = Runner(agent=agent, store=store, app_name=APP)
        try:
            await runner.run(session_id="s", user_id=USER, new_message="Weather in Paris?")
        except Exception as exc:
            return exc, await store.read("s")
    raise AssertionError("the model call did not fail")


async def rejected_session(
    db: Path, wire: Wire, path: str, replies: Sequence[Any], make_model: Callable[[], Model]
) -> list[Event]:
    """Run 1 pauses on the paid forecast; another store object rejects it; run 2 sends the
    rejection to the model (``replies[2]``, then the final ``replies[4]``). Returns the log."""
    wire.reply(path, replies[0])
    wire.reply(path, replies[1])
    async with await open_store(db, auto_upgrade=True) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id="s")
        runner = demo_runner(store, [], app_name=APP, model=make_model())
        first = await runner.run(session_id="s", user_id=USER, new_message=QUESTION)
    assert first.status == "paused_for_confirmation"
    async with await open_store(db) as other:
        await answer_confirmation(
            other, session_id="s", confirmation_id=first.pending_call_ids[0], confirmed=False
        )
    wire.reply(path, replies[4])
    async with await open_store(db) as store:
        runner = demo_runner(store, [], app_name=APP, model=make_model())
        second = await runner.run(session_id="s", user_id=USER)
        assert second.status == "completed", second
        return await store.read("s")
