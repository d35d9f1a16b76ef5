"""Helpers for the CLI tests: build real databases through the store API, invoke ``evs``.

The CLI runs its own event loop per command, so CLI tests are synchronous; databases are built
with ``build()``, which runs a coroutine on a private loop.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from typer.testing import CliRunner, Result

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
    Content,
    Event,
    EventActions,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    open_store,
)
from runtime.cli import app

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[3]
AGENT = "weather_agent"


def build(url: str, work: Callable[[EventStore], Awaitable[T]]) -> T:
    """Open the store at ``url`` (creating/upgrading its schema), run ``work``, close it."""

    async def main() -> T:
        async with await open_store(url, auto_upgrade=True) as store:
            return await work(store)

    return asyncio.run(main())


def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    """Run ``evs ARGS`` in-process through the full typer app (``runtime.cli``)."""
    return CliRunner().invoke(app, list(args), env=env, input=input, catch_exceptions=False)


def evs_subprocess(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m runtime.cli ARGS`` (the full ``evs``) in a child process."""
    full_env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    full_env.update({"PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def text(value: str) -> Part:
    """A text part."""
    return Part(text=value)


def call(call_id: str, name: str, **args: Any) -> Part:
    """A function-call part."""
    return Part(function_call=FunctionCall(id=call_id, name=name, args=args))


def response(call_id: str, name: str, **payload: Any) -> Part:
    """A function-response part."""
    return Part(function_response=FunctionResponse(id=call_id, name=name, response=payload))


def paused_weather_log() -> list[Event]:
    """A weather session as the runtime writes it (see docs/protocol.md), paused on a
    confirmation for ``paid_lookup`` (call c3) with a long-running ``forecast`` (c4) open."""
    return [
        Event(author="user", content=Content(role="user", parts=(
            text("Weather in Paris and Atlantis?"),))),
        Event(author=AGENT, turn_complete=True, content=Content(role="model", parts=(
            call("c1", "get_weather", city="Paris"), call("c2", "get_weather", city="Atlantis")))),
        Event(author=AGENT, started_call_ids=("c1", "c2"),
              custom_metadata={"idempotency_keys": {"c1": "k1", "c2": "k2"}}),
        Event(author=AGENT, content=Content(role="user", parts=(
            response("c1", "get_weather", temp_c=21, sky="sunny"),
            response("c2", "get_weather", error={"kind": "execution_failed",
                                                 "tool": "get_weather",
                                                 "message": "unknown city 'Atlantis'"}))),
              actions=EventActions(state_delta={"last_city": "Paris", "user:units": "metric"})),
        Event(author=AGENT, turn_complete=True, long_running_tool_ids=("c4",),
              content=Content(role="model", parts=(
                  call("c3", "paid_lookup", city="Paris"), call("c4", "forecast", days=3)))),
        Event(author=AGENT, started_call_ids=("c3", "c4")),
        Event(author=AGENT, content=Content(role="user", parts=(
            response("c3", "paid_lookup", error={"kind": "confirmation_required",
                                                 "tool": "paid_lookup",
                                                 "message": "needs confirmation"}),)),
              actions=EventActions(requested_tool_confirmations={
                  "c3": ToolConfirmation(hint="This lookup costs $0.10.")})),
        Event(author=AGENT, long_running_tool_ids=("confirm-1",),
              content=Content(role="model", parts=(
                  call("confirm-1", REQUEST_CONFIRMATION_FUNCTION,
                       originalFunctionCall={"id": "c3", "name": "paid_lookup",
                                             "args": {"city": "Paris"}},
                       toolConfirmation={"hint": "This lookup costs $0.10.",
                                         "confirmed": False, "payload": None}),))),
    ]


def finishing_log() -> list[Event]:
    """The events that finish ``paused_weather_log``: approval, the paid result, the
    long-running result, an artifact and the final answer."""
    return [
        Event(author="user", content=Content(role="user", parts=(
            response("confirm-1", REQUEST_CONFIRMATION_FUNCTION, confirmed=True,
                     payload=None),))),
        Event(author=AGENT, started_call_ids=("c3",)),
        Event(author=AGENT, content=Content(role="user", parts=(
            response("c3", "paid_lookup", humidity=40),)),
              actions=EventActions(state_delta={"paid": True})),
        Event(author="user", content=Content(role="user", parts=(
            response("c4", "forecast", days=["sun", "rain", "sun"]),))),
        Event(author=AGENT, turn_complete=True, content=Content(role="model", parts=(
            text("Paris: 21°C and sunny; rain on Tuesday."),
            Part(artifact=ArtifactRef(filename="report.txt", version=0,
                                      mime_type="text/plain")))),
              actions=EventActions(artifact_delta={"report.txt": 0},
                                   state_deletions=("last_city",))),
    ]


FINISHING_ARTIFACTS = (("report.txt", b"Paris: 21\xc2\xb0C and sunny; rain on Tuesday.\n"),)
"""The artifact versions ``finishing_log`` refers to (``report.txt`` v0)."""


def make_session(
    url: str,
    events: list[Event],
    *,
    session_id: str = "s1",
    app_name: str = "weather",
    user_id: str = "ada",
    state: dict[str, Any] | None = None,
    artifacts: Sequence[tuple[str, bytes]] = (),
) -> None:
    """Create a session holding ``events`` (appended in one batch) in the database at ``url``,
    then save ``artifacts`` (filename, bytes; ``text/plain``) in order."""

    async def work(store: EventStore) -> None:
        session = await store.create_session(app_name=app_name, user_id=user_id,
                                             session_id=session_id, state=state)
        if events:
            await store.append(session.id, events, expected_version=session.version)
        for filename, data in artifacts:
            await store.save_artifact(session.id, filename, data, mime_type="text/plain")

    build(url, work)


def file_fingerprint(path: Path) -> tuple[bytes, int, int]:
    """The bytes and mtime of a database file, and the size of its write-ahead log (a write
    would land there first)."""
    wal = Path(f"{path}-wal")
    return path.read_bytes(), path.stat().st_mtime_ns, wal.stat().st_size if wal.exists() else 0
