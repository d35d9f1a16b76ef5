"""The pure result mapping (``plan_result``) and the public surface of ``runtime.mcp``."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from _extras import require_extra
from hypothesis import given
from hypothesis import strategies as st

sdk = require_extra("mcp", "mcp")

import mcp_types as types  # noqa: E402

import runtime.mcp  # noqa: E402
from runtime import ToolResultError  # noqa: E402
from runtime.mcp import MCPToolError, plan_result  # noqa: E402

EXPECTED_ALL = [
    "IDEMPOTENCY_KEY_META", "MCPConfigurationError", "MCPConfirmation", "MCPConnection",
    "MCPConnectionError", "MCPTool", "MCPToolError", "MCPToolPredicate", "MCPToolset",
    "PendingArtifact", "PlannedResult", "ProtocolMode", "StdioServer", "StreamableHttpServer",
    "map_result", "plan_result",
]


def test_mcp_public_surface_is_exactly_all() -> None:
    assert runtime.mcp.__all__ == EXPECTED_ALL == sorted(EXPECTED_ALL)
    assert all(hasattr(runtime.mcp, name) for name in EXPECTED_ALL)


def text(value: str) -> types.TextContent:
    return types.TextContent(text=value, _meta={"secret": 1})


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param(types.CallToolResult(content=[text("a"), text("b")], _meta={"x": 1}),
                     {"result": "a\nb"}, id="text-joined"),
        pytest.param(types.CallToolResult(content=[], structured_content={"k": 1, "_meta": 2}),
                     {"k": 1}, id="structured-meta-stripped"),
        pytest.param(types.CallToolResult(content=[text("3")], structured_content=[1, 2]),
                     {"result": [1, 2]}, id="structured-non-object"),
        pytest.param(types.CallToolResult(content=[types.ResourceLink(
            uri="file:///a.txt", name="a", mime_type="text/plain")]),
            {"result": "", "links": [{"uri": "file:///a.txt", "name": "a",
                                      "mime_type": "text/plain"}]}, id="resource-link"),
    ],
)
def test_plan_result_maps_content(result: types.CallToolResult, expected: dict[str, Any]) -> None:
    planned = plan_result(result, tool_name="t", call_id="c")
    assert planned.response == expected
    assert planned.artifacts == ()


def test_plan_result_is_error_raises_with_the_server_text() -> None:
    with pytest.raises(MCPToolError, match="quota exceeded") as caught:
        plan_result(types.CallToolResult(content=[text("quota exceeded")], is_error=True),
                    tool_name="t", call_id="c")
    assert caught.value.server_text == "quota exceeded"
    assert caught.value.tool_name == "t"


def test_plan_result_refuses_bad_base64() -> None:
    bad = types.CallToolResult(content=[types.ImageContent(data="%%%", mime_type="image/png")])
    with pytest.raises(ToolResultError, match="not valid base64"):
        plan_result(bad, tool_name="t", call_id="c")


@given(st.lists(st.binary(max_size=64), max_size=4), st.text(min_size=1, max_size=20))
def test_plan_result_artifacts_keep_bytes_and_have_unique_safe_names(
    blobs: list[bytes], call_id: str
) -> None:
    content: list[Any] = [
        types.ImageContent(data=base64.b64encode(blob).decode(), mime_type="image/png")
        for blob in blobs
    ]
    planned = plan_result(types.CallToolResult(content=content), tool_name="t", call_id=call_id)
    assert [a.data for a in planned.artifacts] == blobs
    names = [a.filename for a in planned.artifacts]
    assert len(set(names)) == len(names)
    assert all("/" not in name and name.endswith(".png") for name in names)


def test_connection_failures_are_classified_for_the_exactly_once_policy() -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST

    from runtime.mcp._connection import connection_dropped, never_delivered

    closed = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
    expired = MCPError(code=INVALID_REQUEST, message="Session terminated")
    refused = ExceptionGroup("transport", [ConnectionRefusedError("refused")])
    assert connection_dropped(closed)
    assert connection_dropped(expired)
    assert not connection_dropped(MCPError(code=INVALID_REQUEST, message="bad params"))
    assert not connection_dropped(ValueError("tool bug"))
    assert not never_delivered(closed)  # in flight: the server may have run it
    assert never_delivered(expired)
    assert never_delivered(refused)
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = refused
    assert never_delivered(wrapped)
    assert not never_delivered(None)
