"""Fixtures of the MCP tests: a counter file, the HTTP server subprocess, a hang guard."""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_support import HttpServer

HANG_GUARD_SECONDS = 120


@pytest.fixture(autouse=True)
def _hang_guard() -> Iterator[None]:
    """Dump every stack and exit if one test runs far longer than any of these should."""
    faulthandler.dump_traceback_later(HANG_GUARD_SECONDS, exit=True, file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    """The file the test server appends one line to per executed call."""
    return tmp_path / "executions.txt"


@pytest.fixture
def http_server(counter: Path) -> Iterator[HttpServer]:
    """The test server over streamable HTTP on 127.0.0.1, killed after the test."""
    server = HttpServer(counter)
    server.start()
    try:
        yield server
    finally:
        server.stop()
