"""One client session to one MCP server: opened lazily, held by a task of its own, reconnected.

The SDK's ``Client`` is an anyio context manager whose task group must be entered and exited by
the same task. Tool calls run in many tasks (parallel calls) and the toolset is closed by yet
another one (the runner), so the client lives in a dedicated holder task: it enters the client,
hands it out, and exits when asked to. Any task may send requests through it.

A dropped connection is noticed three ways: the holder task ended (the transport crashed), the
client's dispatcher says it is closed (a stdio server exited), or a request fails with
``CONNECTION_CLOSED`` / an unknown-session answer. ``MCPConnection.reset`` then closes what is
left, and the next ``client()`` opens a new session.

Reconnect policy: nothing reconnects in the background; a session is opened when ``client()`` is
asked for one and none is open (first use, after a drop, after ``aclose``), and a stdio server is
respawned the same way. When opening fails, no new attempt is made for ``retry_delay`` seconds,
doubled after every further failure in a row up to ``max_retry_delay``; inside that window
``client()`` raises ``MCPConnectionError`` at once (``retry_in`` set) with the last failure's
reason, so a server that is away costs one attempt (at most ``connect_timeout``) per window, not
one per request. The first session opened resets the delay. ``failed_attempts``, ``retry_in()``
and ``last_error`` tell where a connection stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runtime.mcp._exceptions import MCPConnectionError

__all__ = ["MCPConnection", "ProtocolMode", "StdioServer", "StreamableHttpServer"]

logger = logging.getLogger("runtime.mcp")


@dataclass(frozen=True, kw_only=True)
class StdioServer:
    """An MCP server started as a subprocess and spoken to over its stdin/stdout."""

    command: str
    """The executable to run."""
    args: Sequence[str] = ()
    """Its command-line arguments."""
    env: Mapping[str, str] | None = None
    """Extra environment variables, merged over the SDK's safe default environment."""
    cwd: str | Path | None = None
    """The working directory of the subprocess (default: this process's)."""

    def describe(self) -> str:
        """Return the command line, for error messages."""
        return " ".join([self.command, *self.args])


@dataclass(frozen=True, kw_only=True)
class StreamableHttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    """The endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers sent with every request (authorization and the like)."""

    def describe(self) -> str:
        """Return the URL, for error messages."""
        return self.url


def dispatcher_closed(client: Client) -> bool:
    """Return whether the client's transport is known to be closed.

    The SDK keeps no public "connected" flag; ``_closed`` on its dispatcher is the very flag its
    ``send_request`` checks before refusing with ``CONNECTION_CLOSED``, so reading it here makes
    the same decision one step earlier (before a call is sent, not after).
    """
    try:
        session = client.session
    except RuntimeError:
        return True
    return bool(getattr(getattr(session, "_dispatcher", None), "_closed", False))


def connection_dropped(exc: BaseException) -> bool:
    """Return whether ``exc`` means the connection (not the tool) failed."""
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED or _session_unknown(exc)
    return isinstance(exc, OSError | EOFError)


def _session_unknown(exc: MCPError) -> bool:
    # A streamable-HTTP server that restarted answers 404 for the old session id, which the SDK
    # reports as INVALID_REQUEST "Session terminated": the request never reached a tool.
    return exc.code == INVALID_REQUEST and "session" in str(exc).lower()


def never_delivered(exc: BaseException | None) -> bool:
    """Return whether a transport failure proves the request never reached the server.

    True for an unknown-session answer and for a refused connection (found anywhere in the
    exception's groups, causes and contexts).
    """
    seen: set[int] = set()
    stack: list[BaseException] = [exc] if exc is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MCPError) and _session_unknown(current):
            return True
        if isinstance(current, ConnectionRefusedError) or type(current).__name__ == "ConnectError":
            return True
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)
    return False


def describe_failure(exc: BaseException) -> str:
    """Return ``Type: message`` of what actually failed, looking inside exception groups.

    The SDK's transports fail with task-group ``ExceptionGroup``s around the real error (an
    ``httpx`` ``ConnectError``, a closed stdio pipe); the group's own text names none of it.
    """
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_failure(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers; the HTTP client is closed with the transport (the SDK
    leaves a client it did not create open)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


ProtocolMode = Literal["legacy", "auto"]
"""How a session negotiates: ``"legacy"`` is the initialize handshake every server generation
serves (``tools/list_changed`` arrives as a notification on the session); ``"auto"`` lets the SDK
pick the 2026-07-28 stateless protocol when the server offers it (``tools/list_changed`` then
arrives on a ``subscriptions/listen`` stream the connection opens when the server advertises it)."""


def _listens(client: Client) -> bool:
    tools = client.server_capabilities.tools
    return (
        client.protocol_version in MODERN_PROTOCOL_VERSIONS
        and tools is not None
        and bool(tools.list_changed)
    )


class MCPConnection:
    """A lazily opened client session to one MCP server (see the module docstring).

    Guarantees: at most one session is open at a time; ``client()`` opens one when there is none
    or the last one dropped, but not within the retry delay after a failed attempt (see the
    module docstring); ``aclose()`` closes it and is idempotent (a later ``client()`` opens a new
    one). ``on_tools_changed`` is called for every ``tools/list_changed`` notification.
    """

    def __init__(
        self,
        server: StdioServer | StreamableHttpServer,
        *,
        on_tools_changed: Callable[[], None],
        connect_timeout: float,
        read_timeout: float | None,
        protocol: ProtocolMode = "legacy",
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
    ) -> None:
        self.server = server
        """What this connection talks to."""
        self._on_tools_changed = on_tools_changed
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._protocol = protocol
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._retry_at = 0.0
        self.opened = 0
        """How many sessions this connection has opened (1 + reconnects)."""
        self.failed_attempts = 0
        """Attempts to open a session that failed in a row (0 once one is open)."""
        self.last_error: MCPConnectionError | None = None
        """Why the last attempt to open a session failed (``None`` once one is open)."""

    @property
    def is_open(self) -> bool:
        """True while a session is open and not known to have dropped."""
        return self._client is not None and not self._dropped(self._client)

    @property
    def dropped(self) -> bool:
        """True when a session was open and is known to have ended without ``aclose``/``reset``
        (a stdio server exited, the transport crashed); the next ``client()`` replaces it."""
        return self._client is not None and self._dropped(self._client)

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the open session negotiated (``None`` when none is open)."""
        client = self._client
        return client.protocol_version if client is not None and self.is_open else None

    def retry_in(self) -> float:
        """Seconds until a new attempt to open a session is allowed (0: allowed now)."""
        if not self.failed_attempts:
            return 0.0
        return max(0.0, self._retry_at - time.monotonic())

    def _dropped(self, client: Client) -> bool:
        holder = self._holder
        return holder is None or holder.done() or dispatcher_closed(client)

    async def client(self) -> Client:
        """Return the open client, opening a session first when there is none or it dropped.

        Raises ``MCPConnectionError`` when the server cannot be reached within the connect
        timeout, and at once (``retry_in`` set, nothing attempted) while the retry delay after
        a failed attempt runs.
        """
        async with self._lock:
            if self._client is not None and not self._dropped(self._client):
                return self._client
            await self._close_locked()
            wait = self.retry_in()
            if wait > 0 and self.last_error is not None:
                raise MCPConnectionError(
                    f"The MCP server {self.server.describe()!r} is unreachable ("
                    f"{self.failed_attempts} failed attempt(s) in a row, the last: "
                    f"{self.last_error}); next attempt in {wait:.1f} s.",
                    server=self.server.describe(),
                    retry_in=wait,
                ) from self.last_error
            try:
                client = await self._open_locked()
            except MCPConnectionError as exc:
                self._failed_attempt(exc)
                raise
            if self.failed_attempts:
                logger.info("The MCP server %s is reachable again after %d failed attempt(s).",
                            self.server.describe(), self.failed_attempts)
            self.failed_attempts, self.last_error = 0, None
            return client

    def _failed_attempt(self, exc: MCPConnectionError) -> None:
        self.failed_attempts += 1
        self.last_error = exc
        # The exponent is capped so that a very long outage cannot overflow the float.
        backoff = self._retry_delay * 2.0 ** min(self.failed_attempts - 1, 32)
        delay = min(self._max_retry_delay, backoff)
        self._retry_at = time.monotonic() + delay
        logger.info("%s (attempt %d in a row; the next one not before %.1f s)",
                    exc, self.failed_attempts, delay)

    async def last_failure(self) -> BaseException | None:
        """Return why the holder task ended (waiting briefly for it to end), if it failed."""
        holder = self._holder
        if holder is not None and not holder.done():
            await asyncio.wait({holder}, timeout=0.5)
        return self._failure

    async def reset(self) -> None:
        """Close the current session (it dropped); the next ``client()`` opens a new one."""
        async with self._lock:
            await self._close_locked()

    async def abandon(self, error: MCPConnectionError) -> None:
        """Close a session that stopped answering and count it as a failed attempt to connect,
        so the retry delay applies before the next one (``last_error`` becomes ``error``)."""
        async with self._lock:
            await self._close_locked()
            self._failed_attempt(error)

    async def aclose(self) -> None:
        """Close the session, if any, and wait for its subprocess or HTTP session to end."""
        async with self._lock:
            await self._close_locked()

    def _new_client(self) -> Client:
        server = self.server
        target: StdioServerParameters | Any
        if isinstance(server, StdioServer):
            target = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) if server.env is not None else None,
                cwd=server.cwd,
            )
        else:
            target = _http_transport(server.url, dict(server.headers))
        # The SDK's response cache stays off: the toolset keeps its own tool list and knows when
        # it is stale.
        return Client(
            target,
            mode=self._protocol,
            cache=None,
            read_timeout_seconds=self._read_timeout,
            message_handler=self._on_message,
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()

    async def _open_locked(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        stop = asyncio.Event()
        self._failure = None
        holder = asyncio.create_task(self._hold(self._new_client(), ready, stop))
        self._holder, self._stop = holder, stop
        waited: set[asyncio.Future[Any]] = {ready, holder}
        await asyncio.wait(waited, timeout=self._connect_timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not ready.cancelled() and ready.exception() is None:
            client = ready.result()
        else:
            failure: BaseException | None = None
            if ready.done() and not ready.cancelled():
                failure = ready.exception()
            await self._close_locked()
            if failure is None:
                failure = self._failure
            detail = (
                describe_failure(failure)
                if failure is not None
                else f"no session within {self._connect_timeout} s"
            )
            raise MCPConnectionError(
                f"Cannot connect to the MCP server {self.server.describe()!r}: {detail}",
                server=self.server.describe(),
            ) from failure
        self._client = client
        self.opened += 1
        return client

    async def _hold(
        self, client: Client, ready: asyncio.Future[Client], stop: asyncio.Event
    ) -> None:
        try:
            async with client:
                if not ready.done():
                    ready.set_result(client)
                listener = (
                    asyncio.create_task(self._listen(client)) if _listens(client) else None
                )
                try:
                    await stop.wait()
                finally:
                    if listener is not None:
                        listener.cancel()
                        await asyncio.wait({listener})
        except Exception as exc:
            self._failure = exc
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.info("The MCP connection to %s dropped: %r", self.server.describe(), exc)
        finally:
            if not ready.done():
                ready.cancel()

    async def _listen(self, client: Client) -> None:
        """Forward the tools/list_changed events of a 2026-07-28 session (which has no standing
        notification stream) until the session ends; a lost stream is logged, not fatal."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._on_tools_changed()
        except Exception as exc:
            logger.info("The tools/list_changed stream of %s ended: %r",
                        self.server.describe(), exc)

    async def _close_locked(self) -> None:
        holder, stop = self._holder, self._stop
        self._client = None
        self._holder = self._stop = None
        if holder is None:
            return
        if stop is not None:
            stop.set()
        # asyncio.wait never raises what the holder raised, so a transport's cancellation can
        # not masquerade as this task's own.
        await asyncio.wait({holder}, timeout=self._connect_timeout)
        if not holder.done():
            holder.cancel()
            await asyncio.wait({holder})
