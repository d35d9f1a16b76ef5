"""``evs web``: serve the local web UI (``runtime.web``, the ``[web]`` extra) with uvicorn."""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from eventstore.commands import DEFAULT_DB, CliError, DbOption, errors, printable
from eventstore.commands._common import require_file

from .._host_check import HostPolicy, is_loopback, split_host

__all__ = ["AllowedHostOption", "allowed_policy", "web"]

AllowedHostOption = Annotated[list[str] | None, typer.Option(
    "--allowed-host", metavar="NAME",
    help="Also answer requests for this Host name (NAME for any port, NAME:PORT for one; "
    "repeatable), e.g. a reverse proxy's. Other names get HTTP 421: the defence against DNS "
    "rebinding.")]


def allowed_policy(host: str, allowed: list[str] | None) -> HostPolicy:
    """The Host policy of a server bound to ``host`` with ``--allowed-host`` ``allowed``;
    CliError naming a value that is not a host name."""
    try:
        return HostPolicy.for_server(host, allowed=allowed or ())
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def _url(host: str, port: int, token: str | None) -> str:
    parsed = split_host(host)
    name = parsed[0] if parsed is not None and host.strip() else "127.0.0.1"
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def web(
    db: DbOption = DEFAULT_DB,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")]
    = 8765,
    host: Annotated[str, typer.Option("--host", help="Address to bind (default: this machine "
                                      "only). Any other address makes every page need the "
                                      "token.")] = "127.0.0.1",
    allow_writes: Annotated[bool, typer.Option("--allow-writes", help="Offer approve/reject, "
                                               "results and fork to the browser that opened "
                                               "the printed URL (it carries the token).")]
    = False,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow --allow-writes "
                                               "with a --host other than this machine's "
                                               "loopback (plain HTTP: the token and cookie "
                                               "cross the network unencrypted).")] = False,
    allowed_host: AllowedHostOption = None,
) -> None:
    """Browse sessions in a web browser: timelines, state diffs, pending calls, artifacts.

    Read-only unless --allow-writes. The printed URL carries a per-start token once: opening
    it signs that browser in (a cookie); writes need it, and so do reads when --host is not
    this machine's loopback. Requests for another Host name are refused (421)."""
    with errors():
        try:
            for module in ("starlette", "uvicorn", "jinja2"):
                importlib.import_module(module)
        except ImportError as exc:
            raise CliError(f"evs web needs the web extra ({exc.name} is missing): "
                           "pip install 'agent-eventstore[web]'") from exc
        allowed_policy(host, allowed_host)
        remote = not is_loopback(host)
        if allow_writes and remote and not allow_remote:
            raise CliError(f"evs web: --allow-writes with --host {host} serves writes to other "
                           "machines; add --allow-remote to mean it, or bind 127.0.0.1.")
        require_file(db)
    import uvicorn

    from runtime.web import WebConfig, create_app

    config = WebConfig(db=db, allow_writes=allow_writes, host=host,
                       allowed_hosts=tuple(allowed_host or ()))
    url = _url(host, port, config.token if config.needs_token else None)
    typer.echo(printable(f"evs web: {url}  ({db})", newlines=False), err=True)
    if remote:
        typer.echo(printable(
            f"evs web: bound to {host}, reachable from other machines: every page needs the "
            "token (open the URL above once per browser).", newlines=False), err=True)
    if allow_writes and remote:
        typer.secho("WARNING: writes are open to other machines over plain HTTP. Anyone who "
                    "reads the token or the cookie on the network can approve confirmations "
                    "and fork sessions; prefer 127.0.0.1 behind an SSH tunnel.",
                    err=True, fg="red", bold=True)
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning")
