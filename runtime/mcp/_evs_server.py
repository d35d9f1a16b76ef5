"""``evs mcp-server``: a read-only MCP server over an agent-eventstore database.

It exposes five tools, each annotated ``readOnlyHint``, whose structured output is exactly what
the matching ``evs … --json`` command prints: ``sessions``, ``show``, ``state``, ``pending`` and
``verify``. The store is opened read-only (a SQLite file is opened in read-only mode, so not even
a bug could write), and no tool has a write path. A failed lookup (unknown session …) is an
``isError`` result with a one-line message, never a crash of the server. Session ids are unique
per app and user: the tools that take one also take ``app`` and ``user``, and an id several
(app, user) hold without them is such a result, listing who holds it.

Transports: stdio (the default, for assistants that start the server themselves) and streamable
HTTP on ``host:port`` (path ``/mcp``), behind the Host/Origin check of ``runtime._host_check``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast

import mcp_types as types
from mcp.server.lowlevel import Server

from eventstore import AmbiguousSessionError, EventStore, EventStoreError

from .._host_check import HostCheck, HostPolicy

__all__ = ["EVS_TOOLS", "build_evs_server", "http_app", "serve_http", "serve_stdio"]

_Handler = Callable[[EventStore, Mapping[str, Any]], Awaitable[dict[str, Any]]]
_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


_SESSION = {"type": "string", "description": "Session id."}
_ADDRESS = {
    "app": {"type": "string", "description": "The session's app (needed when several apps or "
            "users have a session with this id)."},
    "user": {"type": "string", "description": "The session's user (needed when several apps "
             "or users have a session with this id)."},
}
_SEQ = {"type": "integer", "minimum": 0}

EVS_TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="sessions",
        description="List sessions (app, user, id, events, last update), one page at a time; "
        "pass next_cursor as after for the next page.",
        input_schema=_schema({
            "app": {"type": "string", "description": "Only this app's sessions."},
            "user": {"type": "string", "description": "Only this user's sessions."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 50},
            "after": {"type": "string", "description": "Cursor of the previous page."},
        }),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="show",
        description="A session's history as a timeline: calls paired with responses, "
        "confirmations, state deltas, artifacts and errors.",
        input_schema=_schema({
            "session_id": _SESSION,
            "since": {**_SEQ, "minimum": 1, "description": "Start at this seq (inclusive)."},
            "last": {**_SEQ, "description": "Only the newest N events."},
            **_ADDRESS,
        }, ("session_id",)),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="state",
        description="The session's state (session, user: and app: keys) with the seq that "
        "last set each key, at head or after a given seq.",
        input_schema=_schema({"session_id": _SESSION,
                              "at": {**_SEQ, "description": "State after this seq."},
                              **_ADDRESS},
                             ("session_id",)),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="pending",
        description="What the session waits for and why: confirmations, long-running calls, "
        "calls in doubt, with the evs command that unblocks each.",
        input_schema=_schema({"session_id": _SESSION, **_ADDRESS}, ("session_id",)),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="verify",
        description="Integrity check of one session (or every session): seq gaps, duplicate "
        "ids, orphan responses, stale snapshots, missing artifacts.",
        input_schema=_schema({"session_id": _SESSION, **_ADDRESS}),
        annotations=_READ_ONLY,
    ),
)
"""The tools ``evs mcp-server`` lists, in this order."""


async def _sessions(store: EventStore, args: Mapping[str, Any]) -> dict[str, Any]:
    page = await store.list_sessions(
        app_name=args.get("app"), user_id=args.get("user"), after=args.get("after"),
        limit=int(args.get("limit", 50)),
    )
    return {
        "sessions": [
            {"id": s.id, "app_name": s.app_name, "user_id": s.user_id, "events": s.version,
             "created_at": s.created_at, "updated_at": s.updated_at}
            for s in page.sessions
        ],
        "next_cursor": page.next_cursor,
    }


async def _show(store: EventStore, args: Mapping[str, Any]) -> dict[str, Any]:
    from eventstore.commands._inspect import load_show_view

    view = await load_show_view(store, str(args["session_id"]), app_name=args.get("app"),
                                user_id=args.get("user"))
    return view.payload(since=args.get("since"), last=args.get("last"))


async def _state(store: EventStore, args: Mapping[str, Any]) -> dict[str, Any]:
    from eventstore.commands._inspect import state_payload

    info = await store.session_info(str(args["session_id"]), app_name=args.get("app"),
                                    user_id=args.get("user"))
    payload, _ = await state_payload(store, info, at=args.get("at"))
    return payload


def _pending_factory(db: str) -> _Handler:
    async def pending(store: EventStore, args: Mapping[str, Any]) -> dict[str, Any]:
        from runtime.cli._pending import pending_payload

        return await pending_payload(store, str(args["session_id"]), db=db,
                                     app_name=args.get("app"), user_id=args.get("user"))

    return pending


async def _verify(store: EventStore, args: Mapping[str, Any]) -> dict[str, Any]:
    from eventstore.commands import verify_session

    session_id = args.get("session_id")
    findings = []
    checked = 0
    if session_id is not None:
        info = await store.session_info(str(session_id), app_name=args.get("app"),
                                        user_id=args.get("user"))
        findings = await verify_session(store, info.id, app_name=info.app_name,
                                        user_id=info.user_id)
        checked = 1
    else:
        after: str | None = None
        while True:
            page = await store.list_sessions(after=after, limit=500)
            for info in page.sessions:
                findings += await verify_session(store, info.id, app_name=info.app_name,
                                                 user_id=info.user_id)
                checked += 1
            if page.next_cursor is None:
                break
            after = page.next_cursor
    return {"sessions_checked": checked, "ok": not findings,
            "findings": [f.as_dict() for f in findings]}


def build_evs_server(store: EventStore, *, db: str) -> Server[Any]:
    """Return the low-level MCP server of ``evs mcp-server`` over an open (read-only) store.

    ``db`` is the URL as the user gave it, used in the ``evs`` commands ``pending`` suggests.
    """
    import jsonschema

    handlers: dict[str, _Handler] = {
        "sessions": _sessions, "show": _show, "state": _state,
        "pending": _pending_factory(db), "verify": _verify,
    }
    validators = {t.name: jsonschema.Draft202012Validator(t.input_schema) for t in EVS_TOOLS}

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(EVS_TOOLS))

    def failure(message: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        handler = handlers.get(params.name)
        if handler is None:
            return failure(
                f"There is no tool {params.name!r}: evs mcp-server is read-only and offers "
                f"{', '.join(handlers)}."
            )
        args = dict(params.arguments or {})
        problems = [e.message for e in validators[params.name].iter_errors(args)]
        if problems:
            return failure(f"Invalid arguments for {params.name}: {'; '.join(problems)}")
        try:
            result = await handler(store, args)
        except AmbiguousSessionError as exc:
            shown = "; ".join(f"app {app!r} user {user!r}" for app, user in exc.choices)
            return failure(f"Session id {exc.session_id!r} is held by {len(exc.choices)} "
                           f"sessions of different apps or users ({shown}); pass app and "
                           "user to pick one.")
        except (EventStoreError, ValueError) as exc:
            return failure(str(exc))
        text = json.dumps(result, default=str)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=json.loads(text)
        )

    return Server("evs", version="1", instructions="Read-only inspection of agent histories "
                  "stored by agent-eventstore.", on_list_tools=list_tools, on_call_tool=call_tool)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def lone_surrogate(value: Any, path: str = "params") -> str | None:
    """The path of the first string (key or value) in a decoded JSON value that holds a lone
    surrogate (a ``\\ud800`` escape: not Unicode text, so no reply that echoes it can be
    encoded), or None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _is_utf8(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _is_utf8(key):
                    return f"a key of {where}"
                stack.append((child, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{n}]") for n, child in enumerate(item))
    return None


class _ScreenedLines:
    """stdin's lines for the MCP SDK's stdio transport, less the requests it could never
    answer: the SDK's strict JSON parser refuses a lone surrogate escape and drops the line
    without a reply, so the client would wait forever. Such a request is answered here with a
    JSON-RPC ``Invalid params`` error naming where the surrogate is (a notification is
    dropped, as it has no reply); every other line passes through unchanged."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines
        self.write: Any = None  # the transport's write stream, set once it exists

    async def __aiter__(self) -> AsyncIterator[str]:
        from mcp.shared.message import SessionMessage

        async for line in self._lines:
            # Only a line with a \u escape of the surrogate range can hold one.
            if "\\ud" not in line.lower():
                yield line
                continue
            try:
                message = json.loads(line)
            except ValueError:
                yield line  # the SDK reports malformed JSON as it does for any other line
                continue
            where = lone_surrogate(message, "message")
            if where is None:
                yield line
                continue
            request_id = message.get("id") if isinstance(message, dict) else None
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) and (
                not isinstance(request_id, str) or _is_utf8(request_id)
            ):
                error = types.JSONRPCError(
                    jsonrpc="2.0", id=request_id,
                    error=types.ErrorData(
                        code=types.INVALID_PARAMS,
                        message=f"{where} holds a lone surrogate escape (\\ud800-\\udfff "
                        "alone), which is not Unicode text; send UTF-8 text.",
                    ),
                )
                await self.write.send(SessionMessage(error))


async def serve_stdio(store: EventStore, *, db: str) -> None:
    """Serve ``evs mcp-server`` on stdin/stdout until the client closes it. Every request is
    answered: one the SDK cannot parse because it holds a lone surrogate gets a JSON-RPC
    error (``_ScreenedLines``)."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_evs_server(store, db=db)
    # A private descriptor of stdin: closing the wrapper never closes the process's stdin.
    stdin = await anyio.open_file(os.dup(0), encoding="utf-8", errors="replace")
    screened = _ScreenedLines(stdin)
    try:
        async with stdio_server(stdin=cast(Any, screened)) as (read, write):
            screened.write = write
            await server.run(read, write, server.create_initialization_options())
    finally:
        await stdin.aclose()


def http_app(store: EventStore, *, db: str, host: str,
             policy: HostPolicy | None = None) -> HostCheck:
    """The ASGI app of ``evs mcp-server`` over streamable HTTP (path ``/mcp``) for a server
    bound to ``host``, behind the Host/Origin check ``evs web`` uses too (``policy``; by
    default the loopback names and ``host``): 421 for any other ``Host``, so a page that
    rebinds its name to this machine reaches no tool, whatever address is bound."""
    from mcp.server.transport_security import TransportSecuritySettings

    # The SDK's own check covers loopback binds only and knows no --allowed-host: the one
    # check, HostCheck, replaces it.
    app = build_evs_server(store, db=db).streamable_http_app(
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return HostCheck(app, policy=policy or HostPolicy.for_server(host))


async def serve_http(store: EventStore, *, db: str, host: str, port: int,
                     policy: HostPolicy | None = None) -> None:
    """Serve ``evs mcp-server`` over streamable HTTP at ``http://host:port/mcp`` until stopped
    (``http_app``)."""
    import uvicorn

    config = uvicorn.Config(http_app(store, db=db, host=host, policy=policy), host=host,
                            port=port, log_level="warning")
    await uvicorn.Server(config).serve()
