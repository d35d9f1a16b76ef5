"""Helpers of the web UI tests: run ``evs`` as a user does, find the demo's session, start
``evs web`` as a subprocess on a free loopback port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)

WAIT = 20.0
"""Seconds any wait for the server or a page may take."""
AGENT = "weather_agent"
"""The agent of ``paused_log``."""


def paused_log(user: str) -> list[Event]:
    """A log paused on confirmation ``confirm-1`` (at #5) of call c1 (at #2) of
    ``paid_lookup`` (docs/protocol.md §5, §6), as the runtime writes it."""
    call = FunctionCall(id="c1", name="paid_lookup", args={"city": f"city of {user}"})
    return [
        Event(author="user", content=Content(role="user", parts=(Part(text=f"hi {user}"),))),
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(Part(function_call=call),))),
        Event(author=AGENT, started_call_ids=("c1",)),
        Event(author=AGENT, content=Content(role="user", parts=(Part(
            function_response=FunctionResponse(id="c1", name="paid_lookup", response={
                "error": {"kind": "confirmation_required", "tool": "paid_lookup",
                          "message": "needs confirmation"}})),)),
              actions=EventActions(requested_tool_confirmations={
                  "c1": ToolConfirmation(hint=f"Costs {user} $0.10.")})),
        Event(author=AGENT, long_running_tool_ids=("confirm-1",),
              content=Content(role="model", parts=(Part(function_call=FunctionCall(
                  id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION, args={
                      "originalFunctionCall": {"id": "c1", "name": "paid_lookup",
                                               "args": call.args},
                      "toolConfirmation": {"hint": f"Costs {user} $0.10.",
                                           "confirmed": False, "payload": None}})),))),
    ]


def evs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``evs`` in a subprocess (bounded), as a user would."""
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def only_session(db: Path) -> str:
    """The id of the only session of ``db``."""
    done = evs("sessions", "--db", str(db), "--json")
    [session] = orjson.loads(done.stdout)["sessions"]
    return str(session["id"])


@dataclass
class Server:
    """A running ``evs web --allow-writes``."""

    url: str
    """Its base URL."""
    token: str
    """The token of the URL it printed."""
    process: subprocess.Popen[str]
    """The process."""

    @property
    def sign_in_url(self) -> str:
        """The URL it printed (with the token), which signs a browser in."""
        return f"{self.url}/?token={self.token}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def web_server(db: Path, *, prefix: Sequence[str] = ()) -> Iterator[Server]:
    """Start ``evs web --db DB --allow-writes`` (behind the command ``prefix``, e.g. one that
    drops privileges), wait until it listens, and stop it at the end."""
    port = _free_port()
    process = subprocess.Popen(
        [*prefix, sys.executable, "-m", "runtime.cli", "web", "--db", str(db), "--port",
         str(port), "--allow-writes"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        text=True)
    try:
        assert process.stderr is not None
        token = ""
        deadline = time.monotonic() + WAIT
        while not token and time.monotonic() < deadline:
            line = process.stderr.readline()
            if line.startswith("evs web: http") and "?token=" in line:
                token = line.split("?token=", 1)[1].split()[0]
            elif not line and process.poll() is not None:
                break
        assert token, f"evs web printed no token: {process.stderr.read()}"
        # Listening comes after the app's startup (the store opens): on a loaded machine that
        # takes a while, so it gets its own, longer wait, and a clear failure.
        deadline = time.monotonic() + 3 * WAIT
        listening = False
        while not listening and time.monotonic() < deadline and process.poll() is None:
            with socket.socket() as sock:
                listening = sock.connect_ex(("127.0.0.1", port)) == 0
            if not listening:
                time.sleep(0.1)
        assert listening, f"evs web did not listen on port {port} within {3 * WAIT:.0f} s"
        yield Server(url=f"http://127.0.0.1:{port}", token=token, process=process)
    finally:
        process.terminate()
        process.wait(timeout=WAIT)
        if process.stderr is not None:
            process.stderr.close()
