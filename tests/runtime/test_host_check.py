"""``runtime._host_check``: which Host and Origin values the servers ``evs`` starts answer
(``evs web``, ``evs mcp-server`` over HTTP), the defence against DNS rebinding."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from runtime._host_check import HostCheck, HostPolicy, is_loopback, split_host


@pytest.mark.parametrize(("value", "parsed"), [
    pytest.param("localhost:8765", ("localhost", 8765), id="name-port"),
    pytest.param("LocalHost.", ("localhost", None), id="case-and-dot"),
    pytest.param("[::1]:80", ("::1", 80), id="v6-port"),
    pytest.param("::1", ("::1", None), id="bare-v6"),
    pytest.param("a:b", None, id="bad-port"),
    pytest.param("a:0", None, id="port-zero"),
    pytest.param("evil.example/x", None, id="path"),
    pytest.param("user@evil", None, id="userinfo"),
    pytest.param("", None, id="empty"),
    pytest.param("[::1", None, id="open-bracket"),
])
def test_split_host_reads_host_values(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert split_host(value) == parsed


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True),
    ("app.localhost", True), ("0.0.0.0", False), ("::", False), ("192.0.2.1", False),
    ("example.org", False),
])
def test_is_loopback_means_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_host_policy_answers_loopback_its_bind_and_allowed_names_only() -> None:
    policy = HostPolicy.for_server("192.0.2.7", allowed=["Proxy.Example", "other.example:9000"])
    for host in ("127.0.0.1:8765", "localhost", "[::1]:1", "192.0.2.7:8765",
                 "proxy.example:443", "other.example:9000"):
        assert policy.accepts(host), host
    for host in ("evil.example", "127.0.0.1.evil.example", "other.example:9001",
                 "192.0.2.8:8765", "", None, "localhost:x"):
        assert not policy.accepts(host), host
    assert policy.accepts_origin("https://proxy.example")
    for origin in ("null", "http://evil.example", "ftp://localhost", "http://localhost/x",
                   "localhost"):
        assert not policy.accepts_origin(origin), origin


def test_host_policy_of_every_address_answers_literals_and_the_machine_name() -> None:
    policy = HostPolicy.for_server("0.0.0.0")
    assert policy.accepts("10.1.2.3:8765")
    assert policy.accepts("[2001:db8::5]:8765")
    assert policy.accepts(f"{socket.gethostname()}:8765")
    assert not policy.accepts("rebound.example:8765")
    assert not HostPolicy.for_server("127.0.0.1").accepts("10.1.2.3:8765")


def test_host_policy_refuses_a_bad_option() -> None:
    with pytest.raises(ValueError, match="--allowed-host 'a b'"):
        HostPolicy.for_server("127.0.0.1", allowed=["a b"])


def _call(policy: HostPolicy, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, bool]:
    reached: list[bool] = []
    sent: list[dict[str, Any]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"secret"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers}
    asyncio.run(HostCheck(inner, policy=policy)(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), bool(reached)


def test_host_check_answers_421_before_the_app_sees_the_request() -> None:
    policy = HostPolicy.for_server("127.0.0.1")
    assert _call(policy, [(b"host", b"127.0.0.1:8765")]) == (200, b"secret", True)
    status, body, reached = _call(policy, [(b"host", b"evil.example:8765")])
    assert (status, reached) == (421, False)
    assert b"secret" not in body
    assert b"--allowed-host" in body
    assert _call(policy, [])[0] == 421
    status, _, reached = _call(policy, [(b"host", b"localhost:8765"),
                                        (b"origin", b"http://evil.example")])
    assert (status, reached) == (403, False)
