"""TCP keepalives and a user timeout on the PostgreSQL backend's connections.

A server process that dies breaks its connections at once; a server *machine* that vanishes
(power loss, a partition) leaves them silent, and an append in flight would wait for the
kernel's retransmissions (about 15 minutes on Linux). The pools' ``init`` sets keepalives and
``TCP_USER_TIMEOUT`` on each connection's socket, which bounds that wait.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["SILENCE_TIMEOUT", "bound_silence"]

SILENCE_TIMEOUT = 15
"""Seconds a connection may go unanswered by the server's machine before it counts as broken
(TCP keepalives after 5 s idle, every 2 s, 5 probes; ``TCP_USER_TIMEOUT`` for data sent and
never acknowledged): the bound on how long an append in flight waits when the primary's
machine vanishes (power loss, partition) rather than its server process dying, which breaks
the connection at once. A server that is merely slow (a lock, a synchronous standby)
acknowledges at the TCP level and is never cut off by this."""


async def bound_silence(conn: Any) -> None:
    """The pool's ``init``: keepalives and a user timeout on the connection's socket
    (``SILENCE_TIMEOUT``; Linux names, skipped where the platform lacks them). asyncpg has no
    option for them, so they are set on the transport's socket."""
    transport = getattr(conn, "_transport", None)
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a Unix socket: nothing between client and server to lose
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 5),
                        ("TCP_USER_TIMEOUT", SILENCE_TIMEOUT * 1000)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
