"""What every command shares: the ``--db``/``--json`` options, opening the store, error exits.

Errors never show a traceback: each becomes one line on stderr and a non-zero exit status, so a
script can rely on ``$?`` and a human reads one sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Coroutine, Iterable, Iterator
from pathlib import Path
from typing import IO, Annotated, Any, NoReturn, TypeVar, cast

import orjson
import typer
from rich.console import Console
from rich.segment import Segment
from typer.core import TyperCommand

from eventstore.backends.sql import sqlite_file
from eventstore.store.facade import EventStore

from .._exceptions import AmbiguousSessionError, CorruptEventError, EventStoreError
from .._open import open_store, resolve_url
from .._session import SessionInfo

__all__ = [
    "DEFAULT_DB",
    "EXIT_ERROR",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_STDOUT_CLOSED",
    "EXIT_USAGE",
    "READ_DB_ENV",
    "AppOption",
    "CliError",
    "Command",
    "DbOption",
    "JsonOption",
    "Paged",
    "SessionArg",
    "UserOption",
    "address_flags",
    "console",
    "errors",
    "fail",
    "open_existing",
    "print_json",
    "printable",
    "prog",
    "read_db",
    "refuse_directory",
    "require_file",
    "run",
    "run_app",
    "shared_address",
    "sqlite_path",
    "stdout_closed",
    "use_read_db",
]

DEFAULT_DB = "./evs.db"
"""The database used when neither ``--db`` nor ``EVS_DATABASE_URL`` names one."""

EXIT_ERROR = 1
"""Exit status of a command that could not do its job (bad input, missing data, database error)."""

EXIT_USAGE = 2
"""Exit status of a command line that does not parse (unknown command or option, bad value)."""

EXIT_FINDINGS = 3
"""Exit status of ``evs verify`` when the log has integrity problems."""

EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (the shell's convention: 128 + SIGINT)."""

EXIT_STDOUT_CLOSED = 141
"""Exit status when stdout was closed before everything was printed (``evs show | head``): what
the shell reports for a program that SIGPIPE ended (128 + 13), as ``git log | head`` does."""

READ_DB_ENV = "EVS_READ_DATABASE_URL"
"""The environment variable naming a hot standby for reads (``evs --read-db``)."""

_READ_DB: dict[str, str | None] = {}


def use_read_db(url: str | None) -> None:
    """Set the standby this process's commands read (``evs --read-db``, or None for none);
    ``evs``'s callback calls it on every invocation, so one in-process run does not leak
    into the next."""
    _READ_DB["url"] = url


def read_db() -> str | None:
    """The standby commands read: what ``use_read_db`` set, else ``EVS_READ_DATABASE_URL``."""
    return _READ_DB["url"] if "url" in _READ_DB else os.environ.get(READ_DB_ENV) or None

DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="EVS_DATABASE_URL",
        metavar="URL",
        help="Store URL: a SQLite file path, sqlite+aiosqlite:///path.db or "
        "postgresql+asyncpg://user@host/db.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
AppOption = Annotated[str | None, typer.Option(
    "--app", metavar="APP", help="The session's app (needed when several apps or users have a "
    "session with this id).")]
UserOption = Annotated[str | None, typer.Option(
    "--user", metavar="USER", help="The session's user (needed when several apps or users "
    "have a session with this id).")]
SessionArg = Annotated[str, typer.Argument(help="Session id.", show_default=False,
                                           metavar="SESSION_ID")]

T = TypeVar("T")


def address_flags(app_name: str | None, user_id: str | None) -> str:
    """`` --app APP --user USER`` (shell-quoted; each only when given): what a command the CLI
    prints adds so that it names the same session as the command that printed it."""
    return "".join(f" {flag} {shlex.quote(value)}" for flag, value in (
        ("--app", app_name), ("--user", user_id)) if value is not None)


async def shared_address(store: EventStore, info: SessionInfo) -> str:
    """``address_flags`` of the session ``info`` describes when another app or user holds its
    id too (a printed command with the bare id would be refused as ambiguous), else ``""``."""
    held = await store.backend.find_sessions(info.id, app_name=None, user_id=None)
    return address_flags(info.app_name, info.user_id) if len(held) > 1 else ""


class Command(TyperCommand):
    """A command whose usage line names arguments plainly (``evs show [OPTIONS] SESSION_ID``;
    newer typer releases write required ones as ``{SESSION_ID}``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces, required arguments without braces."""
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p
                for p in super().collect_usage_pieces(ctx)]


class CliError(Exception):
    """An error the CLI reports as one line (the message) and exit status ``code``."""

    def __init__(self, message: str, *, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


_CONTROL = {
    **{c: f"\\x{c:02x}" for c in range(0x20) if c not in (0x09, 0x0A)},
    0x09: "\\t",
    0x0A: "\\n",
    0x0D: "\\r",
    0x7F: "\\x7f",
    **{c: f"\\x{c:02x}" for c in range(0x80, 0xA0)},
    # Bidirectional overrides reorder what a terminal shows (a "trojan source" trick).
    **{c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}


_LAYOUT = {**_CONTROL}
del _LAYOUT[0x0A]


def printable(text: str, *, newlines: bool = False) -> str:
    """Return ``text`` with every control character shown as an escape (``\\x1b``, ``\\x07``;
    ``\\t``, ``\\n``, ``\\r`` as ``repr`` writes them), so that stored text (messages, state
    keys, ids) can never drive the terminal — no cursor moves, screen clears, hyperlinks or
    window titles — nor break a table row or a header line, and what is printed is what is
    stored. Only ``newlines=True`` keeps line breaks: for text rich has laid out."""
    return text.translate(_LAYOUT if newlines else _CONTROL)


def fail(message: str, *, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``evs: error: message`` on stderr (one line, control characters escaped) and
    exit with ``code``."""
    typer.echo(f"evs: error: {printable(message, newlines=False)}", err=True)
    raise typer.Exit(code)


_prog = "evs"


def prog() -> str:
    """The program name as the user invoked it (``evs``, ``.venv/bin/evs``, ``python -m
    runtime.cli``), shell-quoted, for the commands the CLI prints: a copied line runs as it is,
    without an activated virtual environment. ``evs`` unless ``run_app`` set it."""
    return _prog


def name_program(name: str) -> None:
    """Make ``prog()`` return ``name`` from now on: for output read by someone other than the
    user who started this process (``evs mcp-server`` answers an assistant, which runs ``evs``)."""
    global _prog
    _prog = name


def _detect_prog(argv0: str, *, module: str) -> str:
    """What ``prog()`` returns for a process started as ``argv0``."""
    if not argv0 or argv0 == "-c":
        return "evs"
    started = _module_started_as(argv0)
    if started is not None or Path(argv0).name == "__main__.py":
        module = started or module
        python = sys.executable or "python3"
        found = shutil.which(Path(python).name)
        if found and _same_file(found, python):
            python = Path(python).name
        return f"{shlex.quote(python)} -m {module}"
    name = Path(argv0).name
    found = shutil.which(name)
    if found and _same_file(found, argv0):
        return shlex.quote(name)
    return shlex.quote(argv0)


def _module_started_as(argv0: str) -> str | None:
    """The module ``python -m MODULE`` ran when that module is a plain one, not a package's
    ``__main__`` (``python -m eventstore.cli``, the old name): its file is ``argv0``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is None or spec.name.endswith(".__main__") or spec.origin != argv0:
        return None
    return str(spec.name)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


_EVS_COMMAND = re.compile(r"(?<![\w./-])evs (?=(?:db|verify|confirm|respond|rerun|pending|"
                          r"show|import|export)\b)")
"""An ``evs`` command named in a store message (``evs verify S``, ``evs db upgrade``)."""


@contextlib.contextmanager
def errors() -> Iterator[None]:
    """Turn store and CLI errors raised inside the block into one line and an exit status."""
    try:
        yield
    except CliError as exc:
        fail(str(exc), code=exc.code)
    except AmbiguousSessionError as exc:
        # A usage problem: the user names which one, as for a bad option (exit 2).
        choices = "; ".join(f"--app {shlex.quote(app)} --user {shlex.quote(user)}"
                            for app, user in exc.choices)
        fail(f"Session id {exc.session_id!r} is held by {len(exc.choices)} sessions of "
             f"different apps or users; pick one with: {choices}.", code=EXIT_USAGE)
    except CorruptEventError as exc:
        fail(f"{' '.join(str(exc).split())} The log is damaged: {prog()} verify "
             f"{shlex.quote(exc.session_id)} lists every problem.")
    except EventStoreError as exc:
        # The store's messages name ``evs``; the user may have invoked it under another name.
        fail(_EVS_COMMAND.sub(lambda _: f"{prog()} ", " ".join(str(exc).split())))


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on a new event loop, with ``errors()`` around it."""
    with errors():
        return asyncio.run(coro)
    raise AssertionError("unreachable")  # pragma: no cover


def sqlite_path(url: str) -> Path | None:
    """Return the file a SQLite URL names, or None for other URLs and in-memory SQLite."""
    return sqlite_file(resolve_url(url))


async def open_existing(url: str, *, read_only: bool) -> EventStore:
    """Open the store at ``url``, refusing to create a SQLite file that does not exist.

    Read commands pass ``read_only=True``: the database is opened read-only and never changed.
    ``EVS_READ_DATABASE_URL`` (``evs --read-db``) names a PostgreSQL standby for the reads
    that may be stale (``open_store``'s ``read_urls``).
    """
    require_file(url)
    read_url = read_db()
    return await open_store(url, read_only=read_only,
                            read_urls=[read_url] if read_url else ())


def refuse_directory(url: str) -> None:
    """Raise CliError when ``url`` names a directory where a SQLite file should be (SQLite
    itself says only "disk I/O error", or the file seems missing)."""
    path = sqlite_path(url)
    if path is not None and path.is_dir():
        raise CliError(f"{path} is a directory, not a database file (give a file with --db or "
                       "EVS_DATABASE_URL).")


def require_file(url: str) -> None:
    """Raise CliError when ``url`` names a SQLite file that does not exist."""
    refuse_directory(url)
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise CliError(
            f"There is no database at {path} (give another one with --db or EVS_DATABASE_URL)."
        )


_closed = False


def stdout_closed() -> bool:
    """Whether stdout was closed by its reader (``| head`` has all it wants): a command that only
    prints may stop; one that changes the store finishes its work regardless."""
    return _closed


def _stdout_gone() -> None:
    """Stdout's reader went away: from now on what is printed goes to /dev/null (so neither a
    later write nor the flush at exit raises), and ``run_app`` exits with EXIT_STDOUT_CLOSED."""
    global _closed
    if not _closed:
        _closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)


class _PipeSafeStdout:
    """``sys.stdout`` under ``run_app``: a write or flush that finds the pipe closed (EPIPE) is
    recorded (``stdout_closed``) instead of raised, so no writer — rich, click, ``print_json`` —
    can abort a command halfway through its work, nor print a traceback."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text``; nothing (silently) once the reader is gone."""
        if _closed:
            return len(text)
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            _stdout_gone()
            return len(text)

    def flush(self) -> None:
        """Flush; nothing once the reader is gone."""
        if _closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            _stdout_gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _SafeConsole(Console):
    """A console whose text can never drive the terminal: every control character of what is
    printed (stored text, ids, keys) is shown escaped; only rich's own styling reaches it."""

    def render_str(self, text: str, **options: Any) -> Any:
        """Escape a printed string before rich sees it: rich drops some control characters
        (BEL, backspace, CR) on its own, and the printed id would not be the stored one."""
        return super().render_str(printable(text), **options)

    def on_broken_pipe(self) -> None:
        """Rich's default exits with status 1 mid-command; record the closed stdout instead and
        let the command decide (see ``stdout_closed``)."""
        self.quiet = True
        _stdout_gone()

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # The one place every printed piece of text passes through, after layout and before
        # rich adds its own escape sequences for styles.
        return super()._render_buffer(
            Segment(printable(s.text, newlines=True), s.style, s.control)
            if s.control is None else s
            for s in buffer
        )


def console() -> Console:
    """Return the console commands print to: no markup parsing (ids may contain brackets), no
    automatic highlighting, long lines not wrapped (printed commands stay copyable), and
    control characters escaped (see ``printable``)."""
    return _SafeConsole(highlight=False, markup=False, soft_wrap=True)


class _PagerInput:
    """The pager's stdin as a file for rich: once the pager quits (``q`` in less), writes are
    dropped and ``gone`` says so, so the command stops printing instead of failing."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        """Write ``text`` to the pager; nothing once it has quit."""
        if not self.gone:
            try:
                self._stream.write(text)
            except (BrokenPipeError, ValueError):
                self.gone = True
        return len(text)

    def flush(self) -> None:
        """Flush to the pager; nothing once it has quit."""
        if not self.gone:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self.gone = True

    def isatty(self) -> bool:
        """The pager shows what it reads on the terminal (``less -R`` keeps the colours)."""
        return True


class Paged:
    """Where a long listing prints (``evs show``): the user's pager when stdout is a terminal,
    as ``git log`` does (``$EVS_PAGER``, else ``$PAGER``, else ``less``; ``LESS=FRX`` unless
    ``LESS`` is set, so a short listing stays on screen and less quits by itself), plain stdout
    otherwise; lines are fitted to the terminal width (``COLUMNS`` when set) either way."""

    def __init__(self) -> None:
        command = os.environ.get("EVS_PAGER", os.environ.get("PAGER", "less"))
        self._process: subprocess.Popen[str] | None = None
        self._input: _PagerInput | None = None
        width = shutil.get_terminal_size((100, 24)).columns
        if sys.stdout.isatty() and command.strip() not in ("", "cat"):
            env = {**os.environ}
            env.setdefault("LESS", "FRX")
            self._process = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE,
                                             env=env, text=True, encoding="utf-8",
                                             errors="replace")
            assert self._process.stdin is not None
            self._input = _PagerInput(self._process.stdin)
        self.console: Console = _SafeConsole(highlight=False, markup=False, soft_wrap=False,
                                             file=cast(IO[str], self._input), width=width,
                                             force_terminal=True if self._input else None)
        """Print here; rich wraps each line at the width."""

    @property
    def done(self) -> bool:
        """Whether the reader wants no more: the pager quit, or stdout was closed."""
        return (self._input is not None and self._input.gone) or stdout_closed()

    def close(self) -> None:
        """Hand the rest to the pager and wait until the user quits it."""
        if self._process is not None and self._input is not None:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self._input.flush()
                assert self._process.stdin is not None
                self._process.stdin.close()
            self._process.wait()


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()


def _internal_error(exc: Exception) -> NoReturn:
    """The last line of defence: an exception no command turned into a message is still one
    line (naming it as a bug), unless ``EVS_DEBUG`` asks for the traceback."""
    if os.environ.get("EVS_DEBUG"):
        raise exc
    detail = printable(" ".join(str(exc).split()), newlines=False)
    typer.echo(f"evs: error: internal error ({type(exc).__name__}: {detail}); this is a bug "
               "in agent-eventstore — rerun with EVS_DEBUG=1 for the traceback.", err=True)
    raise SystemExit(EXIT_ERROR) from None


def _take_back_interrupts() -> None:
    """Ctrl-C becomes Python's ``KeyboardInterrupt`` again (which ``run_app`` reports) when
    ``python -m runtime.cli`` guarded its imports (``_evs_launcher.guard_startup``)."""
    launcher = sys.modules.get("_evs_launcher")
    if launcher is not None and launcher.startup_guarded():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_app(app: typer.Typer) -> None:
    """Run a typer app as the ``evs`` console script: usage errors become one line on stderr
    (``evs: error: …``) and exit status 2, like every other error of the CLI.

    Click's own report is a usage block plus a hint plus the error; scripts and humans get one
    sentence instead. Running without a command still prints the help.
    """
    global _prog
    module = "runtime.cli" if app.info.name == "evs" else "eventstore.commands"
    _prog = _detect_prog(sys.argv[0] if sys.argv else "", module=module)
    if not isinstance(sys.stdout, _PipeSafeStdout):
        sys.stdout = _PipeSafeStdout(sys.stdout)
    try:
        _take_back_interrupts()
        # errors(): a command may refuse before its coroutine runs (a missing extra, bad input).
        with errors():
            status = app(standalone_mode=False)
    except typer.Exit as exc:  # from errors(): the one line is printed already
        raise SystemExit(EXIT_STDOUT_CLOSED if _closed and not exc.exit_code
                         else exc.exit_code) from None
    except typer.Abort:
        typer.echo("evs: error: aborted.", err=True)
        raise SystemExit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        typer.echo("evs: interrupted.", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        # Click's exceptions are recognised by their shape rather than their class: typer
        # vendors click in newer releases and uses the click package in older ones.
        code = getattr(exc, "exit_code", None)
        message = getattr(exc, "format_message", None)
        if not isinstance(code, int) or not callable(message):
            _internal_error(exc)
        if type(exc).__name__ == "NoArgsIsHelpError":
            typer.echo(str(message()), err=True)
            raise SystemExit(code) from None
        text = " ".join(str(message()).split())
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            names: list[str] = []
            while getattr(ctx, "parent", None) is not None:
                names.insert(0, str(ctx.info_name))
                ctx = ctx.parent
            text += f" (see: {' '.join([prog(), *names, '--help'])})"
        typer.echo(f"evs: error: {text}", err=True)
        raise SystemExit(code) from None
    if _closed:
        raise SystemExit(EXIT_STDOUT_CLOSED)
    if status == EXIT_INTERRUPTED:
        # Typer turns a KeyboardInterrupt inside a command into this status, silently.
        typer.echo("evs: interrupted.", err=True)
    raise SystemExit(status if isinstance(status, int) else 0)
