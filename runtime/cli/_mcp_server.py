"""``evs mcp-server``: serve the read-only inspection tools to MCP clients (stdio or HTTP)."""

from __future__ import annotations

from typing import Annotated

import typer

from eventstore.commands import DEFAULT_DB, CliError, DbOption, open_existing, run
from eventstore.commands._common import name_program

from ._web import AllowedHostOption, allowed_policy

__all__ = ["mcp_server"]


def mcp_server(
    db: DbOption = DEFAULT_DB,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535,
        help="Serve streamable HTTP on this port (path /mcp) instead of stdio.")] = None,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on with --port.")]
    = "127.0.0.1",
    allowed_host: AllowedHostOption = None,
) -> None:
    """Serve sessions, show, state, pending and verify as MCP tools (read-only: the database
    is opened read-only and never written). Stdio by default, for assistants that start the
    server themselves; --port serves streamable HTTP, answering only requests for this
    machine's loopback names, --host and --allowed-host (421 otherwise)."""
    try:
        from runtime.mcp._evs_server import serve_http, serve_stdio
    except ImportError as exc:
        raise CliError(f"evs mcp-server: {exc}") from exc
    policy = allowed_policy(host, allowed_host)

    # The commands in its answers are for the assistant's user, who runs ``evs``, not for
    # whatever launched this server.
    name_program("evs")

    async def main() -> None:
        async with await open_existing(db, read_only=True) as store:
            if port is None:
                await serve_stdio(store, db=db)
            else:
                await serve_http(store, db=db, host=host, port=port, policy=policy)

    run(main())
