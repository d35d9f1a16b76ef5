"""The store-only ``evs`` typer application: the commands that need nothing but the store.

``runtime.cli`` builds the full ``evs`` (the console script) from this app plus the commands that
drive the runtime (``demo``, ``pending``, ``confirm``, ``respond``, ``rerun``).
"""

from __future__ import annotations

import importlib.metadata
from typing import Annotated

import typer

from ._common import READ_DB_ENV, Command, print_json, use_read_db
from ._fork_cmd import fork
from ._heads import heads
from ._import import import_
from ._inspect import sessions, show, state, tail
from ._maintain import db_current, db_rebuild_snapshots, db_upgrade, delete, export, verify
from ._memory_cmds import memory_rebuild, memory_search
from ._retention_cmds import prune, retention_clear, retention_set, retention_show
from ._sign_artifacts import db_sign_artifacts

__all__ = [
    "SHORT_HELP",
    "ReadDbOption",
    "TopJsonOption",
    "VersionOption",
    "app",
    "package_version",
    "standalone",
    "top_options",
    "version_callback",
]

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

db_app = typer.Typer(help="Schema migrations (alembic) and maintenance of the database.",
                     no_args_is_help=True, rich_markup_mode=None)
db_app.command("upgrade", short_help="Create the database or migrate it to the newest "
               "schema.", cls=Command)(db_upgrade)
db_app.command("current", short_help="Show the database's schema revision.",
               cls=Command)(db_current)
db_app.command("rebuild-snapshots", short_help="Drop every state snapshot (a cache).",
               cls=Command)(db_rebuild_snapshots)
db_app.command("sign-artifacts", short_help="Sign artifact versions saved before the key "
               "(run evs verify first).", cls=Command)(db_sign_artifacts)

SHORT_HELP = {
    "sessions": "List sessions, one page at a time.",
    "show": "Show a session's history as a timeline.",
    "state": "Show a session's state and where each key was set.",
    "tail": "Follow a session live.",
    "verify": "Check the integrity of one session or all.",
    "export": "Export a session as JSON Lines, or as OpenTelemetry traces.",
    "import": "Import an exported session, all or nothing.",
    "delete": "Delete a session.",
    "fork": "Fork a session at a seq into a new session.",
    "prune": "Delete old sessions, each archived and verified first.",
    "heads": "Export every session's head (for verify --expect-heads).",
}
"""One whole short sentence per command for the command list (click would cut the docstring's
first sentence mid-word)."""

for _name, _command in (("sessions", sessions), ("show", show), ("state", state),
                        ("tail", tail), ("verify", verify), ("export", export),
                        ("import", import_), ("delete", delete), ("fork", fork),
                        ("prune", prune), ("heads", heads)):
    app.command(_name, short_help=SHORT_HELP[_name], cls=Command)(_command)
app.add_typer(db_app, name="db", short_help="Schema migrations (alembic) and maintenance.")

memory_app = typer.Typer(
    help="Memory over past sessions: the full-text index, derived from the log.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
memory_app.command("rebuild", short_help="Rebuild the memory index from the log.",
                   cls=Command)(memory_rebuild)
memory_app.command("search", short_help="Search a user's remembered sessions.",
                   cls=Command)(memory_search)
app.add_typer(memory_app, name="memory",
              short_help="Memory over past sessions (full-text index).")

retention_app = typer.Typer(
    help="Retention policies per app: how long sessions are kept before evs prune archives "
    "and deletes them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
retention_app.command("set", short_help="Store an app's retention policy.",
                      cls=Command)(retention_set)
retention_app.command("show", short_help="Show the stored retention policies.",
                      cls=Command)(retention_show)
retention_app.command("clear", short_help="Delete an app's retention policy (or all).",
                      cls=Command)(retention_clear)
app.add_typer(retention_app, name="retention",
              short_help="Retention policies per app (for evs prune).")


def version_callback(value: bool) -> None:
    """Print ``evs VERSION`` and exit (the ``--version`` option)."""
    if value:
        typer.echo(f"evs (agent-eventstore) {package_version()}")
        raise typer.Exit(0)


VersionOption = Annotated[bool, typer.Option("--version", help="Print the version and exit "
                                             "(with --json: as JSON).")]
TopJsonOption = Annotated[bool, typer.Option("--json", help="With --version: print it as "
                                             "JSON.")]
ReadDbOption = Annotated[str | None, typer.Option(
    "--read-db", metavar="URL", envvar=READ_DB_ENV, show_envvar=False,
    help="A PostgreSQL hot standby of --db (or EVS_READ_DATABASE_URL): listings, show, export, "
    "search, tail and the web pages read there; what this process just wrote is read on the "
    "primary.")]


def top_options(ctx: typer.Context, *, version: bool, json: bool,
                read_db: str | None = None) -> None:
    """What ``evs``'s own options do before any command: ``--version`` (``--json`` too:
    ``{"program": "evs", "package": "agent-eventstore", "version": …}``) prints and exits; no
    command at all is a usage error; ``--read-db`` names the standby every command reads."""
    use_read_db(read_db)
    if version:
        if json:
            print_json({"program": "evs", "package": "agent-eventstore",
                        "version": package_version()})
        else:
            version_callback(True)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        hint = " (--json goes after the command: evs show SESSION_ID --json)" if json else ""
        ctx.fail(f"Missing command.{hint}")


def package_version() -> str:
    """The installed agent-eventstore version ("unknown" when run from a bare checkout)."""
    try:
        return importlib.metadata.version("agent-eventstore")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


standalone = typer.Typer(
    help=app.info.help,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
"""What ``python -m eventstore.commands`` runs: ``app`` plus ``--version`` (``app`` itself has no
callback, because ``runtime.cli`` merges it into the full ``evs``)."""
standalone.add_typer(app)


@standalone.callback(invoke_without_command=True)
def _main(ctx: typer.Context, version: VersionOption = False, json: TopJsonOption = False,
          read_db: ReadDbOption = None) -> None:
    """Inspect and maintain an agent-eventstore database (the store-only commands)."""
    top_options(ctx, version=version, json=json, read_db=read_db)
