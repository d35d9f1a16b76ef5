"""The one Host/Origin check of the servers ``evs`` starts (``evs web``, ``evs mcp-server``
over HTTP): a defence against DNS rebinding.

A hostile page can rebind its own name to 127.0.0.1; the browser then sends it the answers of
a local server as if they were same-origin, but every request still names the hostile site in
its ``Host`` header (the browser puts the name of the URL there, not the address it reached).
So a server answers only requests whose ``Host`` is one it was started for: the loopback
names (``localhost``, ``127.0.0.1``, ``[::1]``, any loopback address), the ``--host`` it
binds, and the names given with ``--allowed-host`` (a reverse proxy's, say). A server bound to
every address (``0.0.0.0``, ``::``) also accepts any IP address literal: a rebinding attack
needs a name, so an address in ``Host`` cannot come from one. Anything else gets HTTP 421 and
a one-line plain message, before the application sees the request. A request that names an
``Origin`` (browsers do on POST and on cross-origin fetches) must name an accepted host too
(403 otherwise); ``null`` is refused.

This module is pure ASGI and standard library: both servers import it without any extra.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HostCheck", "HostPolicy", "is_loopback", "split_host"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_EVERY_ADDRESS = frozenset({"", "0.0.0.0", "::"})


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` header value or a ``--host``/``--allowed-host`` option
    (``name``, ``name:port``, ``[v6]``, ``[v6]:port``, a bare v6 address); the name lowercased,
    without brackets or a trailing dot. None when it is not one."""
    text = value.strip().lower()
    port_text = ""
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    elif text.count(":") == 1:
        name, _, port_text = text.partition(":")
    else:
        name = text
        if ":" in name:  # a bare IPv6 address (an option may be one; a Host header is not)
            try:
                ipaddress.IPv6Address(name)
            except ValueError:
                return None
    name = name.rstrip(".")
    if not name or any(c.isspace() or c in "/?#@\\" for c in name):
        return None
    if port_text == "":
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a ``--host`` value) reaches this machine only: ``localhost`` or a
    loopback address."""
    parsed = split_host(host)
    if parsed is None:
        return False
    name = parsed[0]
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPolicy:
    """Which ``Host`` values a server answers (see the module docstring)."""

    names: frozenset[tuple[str, int | None]]
    """Accepted ``(name, port)`` pairs; a port of None accepts the name on any port."""
    any_address: bool = False
    """Whether any IP address literal is accepted (the server binds every address)."""

    @classmethod
    def for_server(cls, bind: str, *, allowed: Iterable[str] = ()) -> HostPolicy:
        """The policy of a server bound to ``bind`` (its ``--host``) with the extra names
        ``allowed`` (``--allowed-host``: ``NAME`` for any port, ``NAME:PORT`` for one).
        Raises ValueError naming a value that is not a host name."""
        names: set[tuple[str, int | None]] = {(n, None) for n in LOOPBACK_NAMES}
        every = bind.strip() in _EVERY_ADDRESS
        if every:
            # Reached by the machine's own name as well as by its addresses.
            names.add((socket.gethostname().lower().rstrip("."), None))
        else:
            parsed = split_host(bind)
            if parsed is None:
                raise ValueError(f"{bind!r} is not a host name or address.")
            names.add((parsed[0], None))
        for value in allowed:
            parsed = split_host(value)
            if parsed is None:
                raise ValueError(f"--allowed-host {value!r} is not a host name, NAME:PORT or "
                                 "an address.")
            names.add(parsed)
        return cls(names=frozenset(names), any_address=every)

    def accepts(self, host: str | None) -> bool:
        """Whether a request whose ``Host`` header is ``host`` is answered."""
        parsed = split_host(host) if host else None
        if parsed is None:
            return False
        name, port = parsed
        if (name, None) in self.names or (name, port) in self.names:
            return True
        return self.any_address and _is_address(name)

    def accepts_origin(self, origin: str) -> bool:
        """Whether an ``Origin`` header names an accepted host (``http`` or ``https``)."""
        scheme, sep, rest = origin.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
            return False
        return self.accepts(rest)


class HostCheck:
    """ASGI middleware: answer 421 to a request whose ``Host`` the policy refuses and 403 to
    one whose ``Origin`` it refuses, before ``app`` sees it (HTTP and WebSocket alike)."""

    def __init__(self, app: _App, *, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        host = headers.get("host")
        if not self.policy.accepts(host):
            await _refuse(scope, receive, send, 421,
                          f"Refused: Host {host!r} is not a name this server was started for "
                          "(a page rebinding its name to this machine sends its own); start it "
                          "with --allowed-host NAME to answer another name.")
            return
        origin = headers.get("origin")
        if origin is not None and not self.policy.accepts_origin(origin):
            await _refuse(scope, receive, send, 403,
                          f"Refused: a request from another origin ({origin}).")
            return
        await self.app(scope, receive, send)


async def _refuse(scope: _Scope, receive: _Receive, send: _Send, status: int,
                  message: str) -> None:
    """Answer with ``status`` and ``message`` as plain text (a WebSocket is closed)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = message.encode("utf-8", "backslashreplace") + b"\n"
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
    ]})
    await send({"type": "http.response.body", "body": body})
