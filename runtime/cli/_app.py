"""The ``evs`` typer application: the store's commands plus the runtime's.

``eventstore.commands.app`` contributes the store's commands (``sessions``, ``show``, ``state``,
``tail``, ``verify``, ``export``, ``import``, ``db`` …); this package adds the commands that
drive the runtime.
"""

from __future__ import annotations

import typer

from eventstore.commands import app as store_app
from eventstore.commands._app import ReadDbOption, TopJsonOption, VersionOption, top_options
from eventstore.commands._common import Command

from ._answer import confirm, rerun, respond
from ._compact import compact
from ._demo import demo
from ._mcp_server import mcp_server
from ._pending import pending
from ._web import web

__all__ = ["app"]

app = typer.Typer(
    name="evs",
    help="Inspect, answer and maintain an agent-eventstore database (--db URL, or "
    "EVS_DATABASE_URL; default ./evs.db). Exit status: 0 done, 1 error (one line on stderr), "
    "2 bad usage, 3 evs verify found problems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

app.command("demo", short_help="Run the weather agent demo on the store.",
            cls=Command)(demo)
app.command("pending", short_help="Show what a session is waiting for and why.",
            cls=Command)(pending)
app.command("confirm", short_help="Approve or reject a call that waits for confirmation.",
            cls=Command)(confirm)
app.command("respond", short_help="Submit the result of a long-running or in-doubt call.",
            cls=Command)(respond)
app.command("rerun", short_help="Allow a call in doubt to run once more.",
            cls=Command)(rerun)
app.command("compact", short_help="Record a summary that stands for older events.",
            cls=Command)(compact)
app.command("mcp-server", short_help="Serve the database read-only to MCP clients.",
            cls=Command)(mcp_server)
app.command("web", short_help="Browse the database in a web browser.", cls=Command)(web)
# Without a name, typer merges the store app's commands (and its ``db`` group) into this one.
app.add_typer(store_app)


@app.callback(invoke_without_command=True)
def _main(ctx: typer.Context, version: VersionOption = False, json: TopJsonOption = False,
          read_db: ReadDbOption = None) -> None:
    """Inspect, answer and maintain an agent-eventstore database."""
    top_options(ctx, version=version, json=json, read_db=read_db)
