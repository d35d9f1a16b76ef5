"""``evs mcp-server`` over HTTP answers only the Host names it was started for, whatever
address it binds: the Host check ``evs web`` uses too (``runtime._host_check``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _extras import require_extra

require_extra("mcp", "mcp")
httpx = require_extra("httpx", "mcp")

from eventstore import open_store  # noqa: E402
from runtime._host_check import HostPolicy  # noqa: E402
from runtime.mcp._evs_server import http_app  # noqa: E402

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"accept": "application/json, text/event-stream",
           "content-type": "application/json"}


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2", "0.0.0.0"])
async def test_evs_mcp_server_refuses_a_foreign_host_with_421(tmp_path: Path, bind: str) -> None:
    db = tmp_path / "evs.db"
    async with await open_store(str(db), auto_upgrade=True) as store:
        app = http_app(store, db=str(db), host=bind,
                       policy=HostPolicy.for_server(bind, allowed=["proxy.example"]))
        async with app.app.router.lifespan_context(app.app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://evil.example:8000"
        ) as http:
            refused = await http.post("/mcp", json=INITIALIZE, headers=HEADERS)
            assert refused.status_code == 421
            assert "Host" in refused.text
            rebound = await http.post("/mcp", json=INITIALIZE, headers={
                **HEADERS, "host": "localhost:8000", "origin": "http://evil.example:8000"})
            assert rebound.status_code == 403
            for host in ("127.0.0.1:8000", "proxy.example"):
                answered = await http.post("/mcp", json=INITIALIZE,
                                           headers={**HEADERS, "host": host})
                assert answered.status_code == 200, (host, answered.text)
