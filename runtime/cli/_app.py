"""The full ``evs`` typer application: the store's commands plus the runtime's.

``eventstore.cli.app`` contributes ``sessions``, ``show``, ``state``, ``tail``, ``verify``,
``export``, ``import`` and ``db``; this package adds the commands that drive the runtime.
"""

from __future__ import annotations

import typer

from eventstore.cli import app as store_app

from ._answer import confirm, rerun, respond
from ._demo import demo
from ._mcp_server import mcp_server
from ._pending import pending

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

app.command("demo")(demo)
app.command("pending")(pending)
app.command("confirm")(confirm)
app.command("respond")(respond)
app.command("rerun")(rerun)
app.command("mcp-server")(mcp_server)
# Without a name, typer merges the store app's commands (and its ``db`` group) into this one.
app.add_typer(store_app)
