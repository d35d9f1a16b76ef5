"""Helpers of the MCP tests: the test server as a stdio command or an HTTP subprocess.

Every subprocess started here is killed when the test ends, and every wait has a timeout, so a
broken server fails a test instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

SERVER = Path(__file__).with_name("_mcp_server.py")
START_TIMEOUT = 30.0


def server_args(counter: Path) -> list[str]:
    """The arguments that start the test server over stdio with this counter file."""
    return [str(SERVER), "--counter", str(counter)]


def executions(counter: Path) -> list[str]:
    """The lines the server wrote to its counter file (one per executed call)."""
    return counter.read_text().splitlines() if counter.exists() else []


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HttpServer:
    """The test server as a streamable-HTTP subprocess on 127.0.0.1 (restartable, same port)."""

    def __init__(self, counter: Path, *extra_args: str) -> None:
        self.counter = counter
        self.extra_args = extra_args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [sys.executable, *server_args(self.counter), *self.extra_args,
             "--http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the test MCP server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the test MCP server did not listen on {self.port} in time")

    def stop(self) -> None:
        """Kill the server (SIGKILL: no goodbye to its clients) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


async def eventually(condition: Callable[[], bool | Awaitable[bool]], *, within: float) -> None:
    """Wait until ``condition()`` holds, polling; raise ``TimeoutError`` after ``within`` s."""
    async with asyncio.timeout(within):
        while True:
            value = condition()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return
            # Polling on purpose: the condition is another process's file or socket state.
            await asyncio.sleep(0.05)
