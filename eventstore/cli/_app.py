"""The store-only ``evs`` typer application: the commands that need nothing but the store.

``runtime.cli`` builds the full ``evs`` (the console script) from this app plus the commands that
drive the runtime (``demo``, ``pending``, ``confirm``, ``respond``, ``rerun``).
"""

from __future__ import annotations

import typer

from ._import import import_
from ._inspect import sessions, show, state, tail
from ._maintain import db_current, db_upgrade, delete, export, verify

__all__ = ["app"]

app = typer.Typer(
    help="Inspect and maintain an agent-eventstore database (--db URL, or EVS_DATABASE_URL; "
    "default ./evs.db): the store-only commands. The evs console script (runtime.cli) adds "
    "demo, pending, confirm, respond and rerun. Exit status: 0 done, 1 error (one line on "
    "stderr), 2 bad usage, 3 evs verify found problems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

db_app = typer.Typer(help="Schema migrations (alembic) for the database.", no_args_is_help=True)
db_app.command("upgrade")(db_upgrade)
db_app.command("current")(db_current)

app.command("sessions")(sessions)
app.command("show")(show)
app.command("state")(state)
app.command("tail")(tail)
app.command("verify")(verify)
app.command("export")(export)
app.command("import")(import_)
app.command("delete")(delete)
app.add_typer(db_app, name="db")
