"""Fixtures of the model adapter tests: a local HTTP server on 127.0.0.1 per wire format."""

from __future__ import annotations

import pytest
from _wire import Wire
from pytest_httpserver import HTTPServer


@pytest.fixture
def wire(httpserver_ipv4: HTTPServer) -> Wire:
    """The provider's endpoint: queued replies, and every request body the SDK sent."""
    recorder = Wire(httpserver_ipv4)
    yield recorder
    httpserver_ipv4.check_assertions()
