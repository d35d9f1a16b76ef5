"""A real MCP server for the tests, written with the SDK's low-level server API.

Run as ``python _mcp_server.py --counter FILE`` (stdio) or with ``--http PORT`` (streamable HTTP on
127.0.0.1). Every executed call of a tool appends ``<tool> <json args>`` to the counter file, so a
test can count executions across restarts of both processes. Tools are listed two per page.
``--exit-unless FILE`` makes the server exit at once (status 3) while FILE does not exist: a
stdio server a test can take down and bring back. ``--hang-listing-while FILE`` makes
``tools/list`` wait (without answering) as long as FILE exists: a server that is up but stuck.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
AUDIO = b"RIFF-fake-wav-bytes"
BLOB = b"\x00\x01binary-resource"

POINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
        }
    },
    "properties": {
        "start": {"$ref": "#/$defs/Point"},
        "shape": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["line", "box"]},
                "end": {"$ref": "#/$defs/Point", "description": "Where it ends."},
            },
            "required": ["kind", "end"],
        },
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "unit": {"const": "px"},
    },
    "required": ["start", "shape"],
}

RECURSIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"child": {"$ref": "#/$defs/Node"}},
        }
    },
    "properties": {"root": {"$ref": "#/$defs/Node"}},
}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or []}


TOOLS = [
    types.Tool(name="draw", description="Draw a shape from a start point.",
               input_schema=POINT_SCHEMA),
    types.Tool(name="fail", description="Always fails.", input_schema=_obj({})),
    types.Tool(
        name="stats",
        description="Structured statistics.",
        input_schema=_obj({"n": {"type": "integer"}}, ["n"]),
        output_schema=_obj({"n": {"type": "integer"}, "square": {"type": "integer"}},
                           ["n", "square"]),
    ),
    types.Tool(name="picture", description="An image, audio and a binary resource.",
               input_schema=_obj({})),
    types.Tool(name="slow", description="Sleeps.",
               input_schema=_obj({"seconds": {"type": "number"}}, ["seconds"])),
    types.Tool(name="recursive", description="A schema no model can be told.",
               input_schema=RECURSIVE_SCHEMA),
    types.Tool(
        name="delete_file",
        description="Deletes a file (destructive).",
        input_schema=_obj({"path": {"type": "string"}}, ["path"]),
        annotations=types.ToolAnnotations(destructive_hint=True),
    ),
    types.Tool(
        name="lookup",
        description="Reads a value.",
        input_schema=_obj({"key": {"type": "string"}}, ["key"]),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="upsert",
        description="Sets a value (idempotent).",
        input_schema=_obj({"key": {"type": "string"}}, ["key"]),
        annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True,
                                          destructive_hint=False),
    ),
    types.Tool(name="pid", description="The server's process id.", input_schema=_obj({}),
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="grow", description="Adds the tool 'extra' and says the list changed.",
               input_schema=_obj({})),
]
EXTRA = types.Tool(name="extra", description="Added at run time.", input_schema=_obj({}))
PAGE = 2


def build_server(counter: Path, *, hang_listing_while: Path | None = None) -> Server[Any]:
    grown = False
    bus = InMemorySubscriptionBus()

    def stuck() -> bool:
        return hang_listing_while is not None and hang_listing_while.exists()

    def listed() -> list[types.Tool]:
        return [*TOOLS, EXTRA] if grown else list(TOOLS)

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # Polling on purpose: the signal is a file another process removes.
        while stuck():  # noqa: ASYNC110
            await anyio.sleep(0.05)
        start = int(params.cursor) if params is not None and params.cursor else 0
        tools = listed()
        page = tools[start:start + PAGE]
        following = start + PAGE
        return types.ListToolsResult(
            tools=page, next_cursor=str(following) if following < len(tools) else None
        )

    def record(name: str, args: dict[str, Any]) -> None:
        with counter.open("a", encoding="utf-8") as file:
            file.write(f"{name} {json.dumps(args, sort_keys=True)}\n")

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal grown
        name, args = params.name, dict(params.arguments or {})
        if name == "slow":
            record("slow-started", args)
            try:
                await anyio.sleep(float(args["seconds"]))
            except anyio.get_cancelled_exc_class():
                record("slow-cancelled", args)
                raise
        record(name, args)
        text = types.TextContent
        if name == "draw":
            return types.CallToolResult(
                content=[text(text=f"drew a {args['shape']['kind']}"),
                         text(text=f"from {args['start']['x']},{args['start']['y']}")],
                _meta={"server/trace": "abc"},
            )
        if name == "fail":
            return types.CallToolResult(content=[text(text="disk full")], is_error=True)
        if name == "stats":
            n = int(args["n"])
            return types.CallToolResult(
                content=[text(text=json.dumps({"n": n, "square": n * n}))],
                structured_content={"n": n, "square": n * n},
                _meta={"server/cost": 1},
            )
        if name == "picture":
            return types.CallToolResult(content=[
                text(text="here it is"),
                types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
                types.AudioContent(data=base64.b64encode(AUDIO).decode(), mime_type="audio/wav"),
                types.EmbeddedResource(resource=types.BlobResourceContents(
                    uri="file:///data/report.bin", mime_type="application/octet-stream",
                    blob=base64.b64encode(BLOB).decode())),
                types.EmbeddedResource(resource=types.TextResourceContents(
                    uri="file:///data/notes.txt", mime_type="text/plain", text="some notes")),
            ])
        if name == "slow":
            return types.CallToolResult(content=[text(text="slept")])
        if name == "pid":
            return types.CallToolResult(content=[], structured_content={"pid": os.getpid()})
        if name == "grow":
            grown = True
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await bus.publish(ToolsListChanged())
            else:
                await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[text(text="grown")])
        if name in {"delete_file", "lookup", "upsert", "extra", "recursive"}:
            return types.CallToolResult(content=[text(text=f"{name} done: {json.dumps(args)}")])
        raise ValueError(f"unknown tool {name}")

    return Server("evs-test-server", version="1.0", on_list_tools=list_tools,
                  on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counter", required=True)
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--exit-unless", default=None)
    parser.add_argument("--hang-listing-while", default=None)
    options = parser.parse_args()
    if options.exit_unless is not None and not Path(options.exit_unless).exists():
        print(f"{options.exit_unless} is missing: not serving", file=sys.stderr, flush=True)
        sys.exit(3)
    hang = Path(options.hang_listing_while) if options.hang_listing_while else None
    server = build_server(Path(options.counter), hang_listing_while=hang)
    if options.http is None:
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options(
                    NotificationOptions(tools_changed=True)))

        anyio.run(serve)
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    print(f"pid {os.getpid()} serving on {options.http}", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
