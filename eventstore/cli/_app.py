"""The ``evs`` typer application: every command registered in one place."""

from __future__ import annotations

import typer

from ._answer import confirm, rerun, respond
from ._demo import demo
from ._inspect import pending, sessions, show, state, tail
from ._maintain import db_current, db_upgrade, export, import_, verify

__all__ = ["app"]

app = typer.Typer(
    name="evs",
    help="Inspect and maintain an agent-eventstore database (--db URL, or EVS_DATABASE_URL; "
    "default ./evs.db). Exit status: 0 done, 1 error (one line on stderr), 2 bad usage, "
    "3 evs verify found problems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

db_app = typer.Typer(help="Schema migrations (alembic) for the database.", no_args_is_help=True)
db_app.command("upgrade")(db_upgrade)
db_app.command("current")(db_current)

app.command("demo")(demo)
app.command("sessions")(sessions)
app.command("show")(show)
app.command("state")(state)
app.command("pending")(pending)
app.command("tail")(tail)
app.command("confirm")(confirm)
app.command("respond")(respond)
app.command("rerun")(rerun)
app.command("verify")(verify)
app.command("export")(export)
app.command("import")(import_)
app.add_typer(db_app, name="db")
