"""``evs web``: serve the local web UI (``runtime.web``, the ``[web]`` extra) with uvicorn."""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from eventstore.cli import DEFAULT_DB, CliError, DbOption, errors, printable
from eventstore.cli._common import require_file

__all__ = ["web"]


def web(
    db: DbOption = DEFAULT_DB,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")]
    = 8765,
    host: Annotated[str, typer.Option("--host", help="Address to bind (default: this machine "
                                      "only).")] = "127.0.0.1",
    allow_writes: Annotated[bool, typer.Option("--allow-writes", help="Offer approve/reject, "
                                               "results and fork; each POST then needs the "
                                               "token printed at start.")] = False,
) -> None:
    """Browse sessions in a web browser: timelines, state diffs, pending calls, artifacts.

    Read-only unless --allow-writes; then a token printed here must accompany every write."""
    with errors():
        try:
            for module in ("starlette", "uvicorn", "jinja2"):
                importlib.import_module(module)
        except ImportError as exc:
            raise CliError(f"evs web needs the web extra ({exc.name} is missing): "
                           "pip install 'agent-eventstore[web]'") from exc
        require_file(db)
    import uvicorn

    from runtime.web import WebConfig, create_app

    config = WebConfig(db=db, allow_writes=allow_writes)
    typer.echo(printable(f"evs web: http://{host}:{port}/  ({db})", newlines=False), err=True)
    if allow_writes:
        typer.echo(f"write token: {config.token}", err=True)
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning")
