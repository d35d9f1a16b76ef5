"""``MCPToolset``: the tools of one MCP server as function tools of the runtime.

Listing: ``tools/list`` is followed through every page; each tool's ``inputSchema`` becomes the
declaration IR through the same JSON-schema parser function tools use. A tool whose schema cannot
be translated (or is not a valid JSON schema) is left out with a logged warning naming it and
why (``MCPToolset.skipped``); the other tools stay usable. The list is cached and fetched again
after a ``tools/list_changed`` notification, a reconnect, a failed attempt to connect, or when the
session is known to have dropped (so a stdio server that exited is respawned by the next listing).

Calling: ``MCPTool.run`` validates the arguments against the server's ``inputSchema`` first, then
sends ``tools/call`` and maps the result (``runtime.mcp._results``). It is an ordinary
``FunctionToolLike``, so the pipeline gives it callbacks, the confirmation gate and structured
errors like any function tool; setting the call's ``cancel_event`` (or cancelling its task)
cancels the request on the server.

Reconnecting (once per call): a session known to have dropped is replaced before the call is
sent. A call whose connection drops while it is in flight is sent again on a new session only
when that cannot run it twice — the tool is idempotent (``readOnlyHint``/``idempotentHint``), or
the transport proves the request never arrived (connection refused, or the server no longer knows
the session). Otherwise it fails with ``MCPConnectionError(may_have_run=True)``; the model gets
``execution_failed`` and nothing is run twice.

Servers that go away: a server that cannot be reached never fails a run. ``tools()`` then
returns the tools of the last listing that succeeded (a server lost after it was listed), or no
tools (a server never reached). A call to a tool of an unreachable server fails with
``MCPConnectionError``, which the pipeline turns into an ``execution_failed`` response naming the
server and the connection problem; the loop goes on. Each failed attempt to connect, by a listing
or by a call, logs one warning on logger ``runtime.mcp`` naming the server, the failure and what
follows for its tools; a refusal inside the retry delay logs at debug level only.
Attempts to connect follow the connection's backoff (``retry_delay``, doubling up to
``max_retry_delay``; see ``runtime.mcp._connection``): the first ``tools()`` or call after the
delay tries again, respawning a stdio server, and the list is fetched anew once it answers.
``list_tools()`` is the strict form: it raises ``MCPConnectionError`` when it has to list and
cannot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import jsonschema
import mcp_types as types

from runtime._context import ReadonlyContext, ToolContext
from runtime._exceptions import (
    InvalidToolArgumentsError,
    SchemaConversionError,
    ToolCallError,
)
from runtime.declarations import (
    DEFAULT_MAX_DEPTH,
    FunctionDeclaration,
    declaration_from_json_schema,
    schema_from_json_schema,
)
from runtime.mcp._connection import (
    MCPConnection,
    ProtocolMode,
    StdioServer,
    StreamableHttpServer,
    connection_dropped,
    describe_failure,
    never_delivered,
)
from runtime.mcp._exceptions import MCPConfigurationError, MCPConnectionError
from runtime.mcp._results import map_result
from runtime.tools import Tool

__all__ = ["IDEMPOTENCY_KEY_META", "MCPConfirmation", "MCPTool", "MCPToolPredicate", "MCPToolset"]

logger = logging.getLogger("runtime.mcp")

MCPConfirmation: TypeAlias = bool | Iterable[str] | Callable[[str, Mapping[str, Any]], bool]
"""Which calls need a human confirmation: all (``True``), none (``False``), the tools named in a
set (server names), or those a predicate on ``(server tool name, arguments)`` picks."""

MCPToolPredicate: TypeAlias = Callable[[ReadonlyContext, "MCPTool"], bool]
"""Decides per request whether an MCP tool is exposed (like ``FilteredToolset``'s predicate)."""

IDEMPOTENCY_KEY_META = "io.agent-eventstore/idempotency-key"
"""The ``_meta`` key of every ``tools/call`` request: the call's stable idempotency key, so a
server can deduplicate the side effects of a call it sees twice."""

_PAGE_CAP = 1000


class MCPTool:
    """One tool of an MCP server, callable by the model.

    Guarantees: ``declaration()`` is the translated ``inputSchema`` under ``name`` (the toolset's
    prefix plus the server's name); ``run`` validates the arguments against the server's schema
    before anything is sent; ``idempotent`` is True when the server annotates the tool
    ``readOnlyHint`` or ``idempotentHint``, so the crash policy may re-run it.
    """

    def __init__(
        self,
        toolset: MCPToolset,
        listed: types.Tool,
        *,
        name: str,
        declaration: FunctionDeclaration,
    ) -> None:
        self._toolset = toolset
        self._listed = listed
        self._name = name
        self._declaration = declaration
        self._validator = jsonschema.Draft202012Validator(listed.input_schema)
        annotations = listed.annotations
        read_only = bool(annotations and annotations.read_only_hint)
        self.server_name = listed.name
        """The tool's name on the server (what ``tools/call`` is sent with)."""
        self.annotations = annotations
        """The server's annotations (hints, not guarantees), if any."""
        self.idempotent = read_only or bool(annotations and annotations.idempotent_hint)
        """A re-run after a crash is safe (``readOnlyHint`` or ``idempotentHint``)."""
        self.destructive = not read_only and not (
            annotations is not None and annotations.destructive_hint is False
        )
        """The tool may destroy data: not read-only and ``destructiveHint`` not false (the MCP
        default for a tool without annotations is destructive)."""

    @property
    def name(self) -> str:
        """The name the model calls (prefix + server name)."""
        return self._name

    @property
    def description(self) -> str:
        """The server's description of the tool."""
        return self._declaration.description

    @property
    def is_long_running(self) -> bool:
        """MCP calls answer in the same request: never long-running."""
        return False

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The server's ``inputSchema`` (arguments are validated against it)."""
        return self._listed.input_schema

    def declaration(self) -> FunctionDeclaration:
        """Return the translated declaration."""
        return self._declaration

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``args`` as a dict; raise ``InvalidToolArgumentsError`` listing every problem."""
        problems = sorted(
            self._validator.iter_errors(dict(args)), key=lambda e: list(map(str, e.path))
        )
        if problems:
            raise InvalidToolArgumentsError(
                self._name,
                errors=[
                    f"{'.'.join(map(str, e.path)) or '(arguments)'}: {e.message}"
                    for e in problems
                ],
            )
        return dict(args)

    def requires_confirmation_for(self, args: Mapping[str, Any]) -> bool:
        """True when the toolset's confirmation rule (or ``confirm_destructive``) picks this call.

        Raises ``InvalidToolArgumentsError`` first when the arguments do not validate.
        """
        validated = self.validate_args(args)
        return self._toolset.needs_confirmation(self, validated)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Validate, call the tool on the server and map its result (see ``runtime.mcp``).

        Raises ``InvalidToolArgumentsError``, ``MCPToolError`` (``isError``),
        ``MCPConnectionError``, ``ToolCallError`` when cancelled through ``ctx.cancel_event``;
        the pipeline turns each into a structured error.
        """
        validated = self.validate_args(args)
        result = await self._toolset.call(self, validated, ctx)
        return await map_result(result, tool_name=self._name, ctx=ctx)

    def __repr__(self) -> str:
        return f"MCPTool(name={self._name!r}, server={self._toolset.server.describe()!r})"


class MCPToolset:
    """The tools of one MCP server (stdio subprocess or streamable HTTP) as a ``Toolset``.

    One client session per toolset, opened lazily by the first ``tools()`` or call and closed by
    ``aclose()`` — ``async with`` the toolset, or ``async with`` the ``Runner`` that runs an agent
    holding it (a closed toolset opens a new session when used again). Options:

    - ``names`` or ``predicate`` (not both): expose only these server tools / those the predicate
      picks per request;
    - ``prefix``: prepended to every tool name the model sees (the server still gets its own
      names); a name clash with another tool is the usual ``ToolDefinitionError`` of packing;
    - ``requires_confirmation`` (``MCPConfirmation``) and ``confirm_destructive`` (also confirm
      every tool that is not annotated read-only or non-destructive);
    - ``connect_timeout`` (seconds to open a session, and again to list the tools: a server
      stuck listing is given up on like one that cannot be reached), ``call_timeout`` (seconds
      per call, ``None``: no limit), ``max_schema_depth`` for the schema translation;
    - ``retry_delay`` / ``max_retry_delay`` (seconds): after a failed attempt to connect, no new
      attempt before ``retry_delay``, doubled per further failure up to ``max_retry_delay``
      (see "Servers that go away" in ``runtime.mcp._toolset``);
    - ``protocol``: ``"legacy"`` (the initialize handshake, default) or ``"auto"`` (the SDK may
      pick the 2026-07-28 stateless protocol) — see ``runtime.mcp.ProtocolMode``.

    Raises ``MCPConfigurationError`` for contradictory options or a negative retry delay.
    """

    def __init__(
        self,
        server: StdioServer | StreamableHttpServer,
        *,
        names: Iterable[str] | None = None,
        predicate: MCPToolPredicate | None = None,
        prefix: str = "",
        requires_confirmation: MCPConfirmation = False,
        confirm_destructive: bool = False,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        max_schema_depth: int = DEFAULT_MAX_DEPTH,
        protocol: ProtocolMode = "legacy",
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
    ) -> None:
        if names is not None and predicate is not None:
            raise MCPConfigurationError(
                f"MCPToolset for {server.describe()!r} takes names= or predicate=, not both."
            )
        if isinstance(requires_confirmation, str):
            raise MCPConfigurationError(
                f"MCPToolset for {server.describe()!r}: requires_confirmation takes a set of tool "
                f"names, not the string {requires_confirmation!r}."
            )
        if not 0 <= retry_delay <= max_retry_delay:
            raise MCPConfigurationError(
                f"MCPToolset for {server.describe()!r}: retry_delay must be at least 0 and at "
                f"most max_retry_delay, got retry_delay={retry_delay!r}, "
                f"max_retry_delay={max_retry_delay!r}."
            )
        self.server = server
        """The server this toolset talks to."""
        self.prefix = prefix
        """Prepended to every tool name the model sees."""
        self._names = frozenset(names) if names is not None else None
        self._predicate = predicate
        self._confirmation: bool | frozenset[str] | Callable[[str, Mapping[str, Any]], bool] = (
            requires_confirmation
            if isinstance(requires_confirmation, bool) or callable(requires_confirmation)
            else frozenset(requires_confirmation)
        )
        self._confirm_destructive = confirm_destructive
        self._max_depth = max_schema_depth
        self._list_timeout = connect_timeout
        self._connection = MCPConnection(
            server,
            on_tools_changed=self._mark_stale,
            connect_timeout=connect_timeout,
            read_timeout=call_timeout,
            protocol=protocol,
            retry_delay=retry_delay,
            max_retry_delay=max_retry_delay,
        )
        self._tools: tuple[MCPTool, ...] | None = None
        self._stale = False
        self._list_lock = asyncio.Lock()
        self.skipped: dict[str, str] = {}
        """Server tool name -> why it was left out of the last listing."""
        self.listings = 0
        """How many times the tool list was fetched from the server."""

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **options: Any,
    ) -> MCPToolset:
        """Return a toolset over a server started as ``command args…`` (stdio); options as for
        ``MCPToolset``."""
        return cls(StdioServer(command=command, args=tuple(args), env=env, cwd=cwd), **options)

    @classmethod
    def http(
        cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any
    ) -> MCPToolset:
        """Return a toolset over a streamable-HTTP server at ``url``; options as for
        ``MCPToolset``."""
        return cls(StreamableHttpServer(url=url, headers=dict(headers or {})), **options)

    @property
    def connection(self) -> MCPConnection:
        """The client session holder (``opened`` counts sessions, i.e. 1 + reconnects)."""
        return self._connection

    async def __aenter__(self) -> MCPToolset:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client session (and stop a stdio server's subprocess); idempotent."""
        await self._connection.aclose()

    def _mark_stale(self) -> None:
        self._stale = True

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return the server's translatable tools that pass the filter, in server order.

        Lists the tools (every page) on first use and after ``tools/list_changed`` or a
        reconnect. Never raises ``MCPConnectionError``: when the server cannot be reached it
        returns the tools of the last successful listing, or none, with a logged warning (see
        "Servers that go away" in the module docstring).
        """
        try:
            tools = await self.list_tools()
        except MCPConnectionError as exc:
            tools = self._tools_while_unreachable(exc)
        if self._predicate is None:
            return tools
        return [tool for tool in tools if self._predicate(readonly_context, tool)]

    async def list_tools(self) -> tuple[MCPTool, ...]:
        """Return the cached tool list (fetched first when missing or stale), names-filtered.

        Raises ``MCPConnectionError`` when it has to fetch and the server cannot be reached;
        the cached list (if any) is kept and fetched again next time.
        """
        async with self._list_lock:
            if self._tools is None or self._stale or self._connection.dropped:
                # Cleared before fetching, so a tools/list_changed arriving meanwhile stays.
                self._stale = False
                try:
                    listed = await self._fetch()
                except BaseException:
                    self._stale = True
                    raise
                self._tools = self._translate(listed)
            return self._tools

    def _tools_while_unreachable(self, exc: MCPConnectionError) -> tuple[MCPTool, ...]:
        last = self._tools or ()
        kept = (
            f"its {len(last)} tool(s) listed last stay declared, and calling one fails,"
            if last
            else "no tools of it are declared (none was ever listed)"
        )
        self._log_unreachable(exc, f"{kept} until it answers")
        return last

    def _log_unreachable(self, exc: MCPConnectionError, consequence: str) -> None:
        # One warning per failed attempt; a refusal inside the retry delay is the same outage.
        level = logging.DEBUG if exc.retry_in is not None else logging.WARNING
        logger.log(level, "The MCP server %s is unreachable: %s. %s",
                   self.server.describe(), consequence, exc)

    async def _fetch(self) -> list[types.Tool]:
        for attempt in (1, 2):
            client = await self._connection.client()
            try:
                async with asyncio.timeout(self._list_timeout):
                    listed = await self._pages(client)
                self.listings += 1
                return listed
            except TimeoutError as exc:
                # Caught before the generic branch: TimeoutError is an OSError, which would read
                # as a dropped connection and be listed again on the same stuck server.
                stuck = MCPConnectionError(
                    f"The MCP server {self.server.describe()!r} did not list its tools within "
                    f"{self._list_timeout} s; the session is closed and opened again later.",
                    server=self.server.describe(),
                )
                await self._connection.abandon(stuck)
                raise stuck from exc
            except Exception as exc:
                if not connection_dropped(exc):
                    raise MCPConnectionError(
                        f"Listing the tools of MCP server {self.server.describe()!r} failed: "
                        f"{describe_failure(exc)}",
                        server=self.server.describe(),
                    ) from exc
                await self._connection.reset()
                if attempt == 2:
                    raise MCPConnectionError(
                        f"The connection to MCP server {self.server.describe()!r} dropped while "
                        f"listing its tools, twice: {exc}",
                        server=self.server.describe(),
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _pages(self, client: Any) -> list[types.Tool]:
        listed: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_PAGE_CAP):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        return listed

    def _translate(self, listed: Iterable[types.Tool]) -> tuple[MCPTool, ...]:
        tools: list[MCPTool] = []
        self.skipped = {}
        for entry in listed:
            if self._names is not None and entry.name not in self._names:
                continue
            name = f"{self.prefix}{entry.name}"
            try:
                jsonschema.Draft202012Validator.check_schema(entry.input_schema)
                declaration = declaration_from_json_schema(
                    name,
                    description=entry.description or (entry.title or ""),
                    parameters=entry.input_schema,
                    max_depth=self._max_depth,
                )
            except (SchemaConversionError, jsonschema.SchemaError) as exc:
                reason = getattr(exc, "message", None) or str(exc)
                self.skipped[entry.name] = reason
                logger.warning(
                    "MCP tool %r of %s is left out: its input schema cannot be translated: %s",
                    entry.name, self.server.describe(), reason,
                )
                continue
            if entry.output_schema is not None:
                try:
                    response = schema_from_json_schema(
                        entry.output_schema, max_depth=self._max_depth
                    )
                except SchemaConversionError:
                    response = None
                declaration = FunctionDeclaration(
                    name=declaration.name,
                    description=declaration.description,
                    parameters=declaration.parameters,
                    response=response,
                )
            tools.append(MCPTool(self, entry, name=name, declaration=declaration))
        return tuple(tools)

    def needs_confirmation(self, tool: MCPTool, args: Mapping[str, Any]) -> bool:
        """Apply the confirmation rule to a call of ``tool`` with (validated) ``args``."""
        rule = self._confirmation
        if isinstance(rule, bool):
            needed = rule
        elif isinstance(rule, frozenset):
            needed = tool.server_name in rule
        else:
            needed = bool(rule(tool.server_name, args))
        return needed or (self._confirm_destructive and tool.destructive)

    async def call(
        self, tool: MCPTool, args: dict[str, Any], ctx: ToolContext
    ) -> types.CallToolResult:
        """Send ``tools/call`` for ``tool``, reconnecting at most once (see the module docstring).

        Raises ``MCPConnectionError``, ``ToolCallError`` (cancelled), and ``ToolCallError`` for a
        protocol error the server answered (unknown tool, bad request).
        """
        from mcp.shared.exceptions import MCPError

        reconnected = False
        while True:
            opened_before = self._connection.opened
            try:
                client = await self._connection.client()
            except MCPConnectionError as exc:
                # Whatever the server offers once it is back is listed anew.
                self._stale = True
                self._log_unreachable(exc, f"the call of {tool.server_name!r} fails")
                raise
            if opened_before and self._connection.opened != opened_before:
                reconnected = True
                self._stale = True
            try:
                return await self._send(client, tool, args, ctx)
            except ToolCallError:
                raise
            except Exception as exc:
                if not connection_dropped(exc):
                    if isinstance(exc, MCPError):
                        raise ToolCallError(
                            f"The MCP server refused the call of {tool.server_name!r}: {exc}",
                            tool_name=tool.name,
                        ) from exc
                    raise
                failure = await self._connection.last_failure()
                undelivered = never_delivered(exc) or never_delivered(failure)
                await self._connection.reset()
                self._stale = True
                if reconnected or not (undelivered or tool.idempotent):
                    may_have_run = not undelivered
                    raise MCPConnectionError(
                        f"The connection to MCP server {self.server.describe()!r} dropped during "
                        f"the call of {tool.server_name!r}"
                        + (
                            "; the server may have run it, so it is not sent again."
                            if may_have_run and not reconnected
                            else " after one reconnect."
                        ),
                        server=self.server.describe(),
                        may_have_run=may_have_run,
                    ) from exc
                reconnected = True

    async def _send(
        self, client: Any, tool: MCPTool, args: dict[str, Any], ctx: ToolContext
    ) -> types.CallToolResult:
        meta: Any = {IDEMPOTENCY_KEY_META: ctx.idempotency_key} if ctx.function_call_id else None
        request = asyncio.ensure_future(client.call_tool(tool.server_name, args, meta=meta))
        cancelled = asyncio.ensure_future(ctx.cancel_event.wait())
        try:
            await asyncio.wait({request, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not request.done():
                request.cancel()
                await asyncio.wait({request})
        if request.cancelled():
            raise ToolCallError(
                f"The call of MCP tool {tool.server_name!r} was cancelled (the tool context's "
                f"cancel event was set).",
                tool_name=tool.name,
            )
        result: types.CallToolResult = request.result()
        return result

    def __repr__(self) -> str:
        return f"MCPToolset({self.server.describe()!r})"
