"""New SQLite databases for tests, copied from one migrated in this process instead of migrated
again each time.

``open_store(path, auto_upgrade=True)`` on a file that does not exist runs every alembic
migration: about 0.1 to 0.2 s of CPU, and a few hundred tests of the quick subset open a new
file each (about half its CPU once). ``install()`` wraps the upgrade that opening runs
(``eventstore.backends.sqlite.open.upgrade``) so that a file that does not exist yet (and has no
``-wal``/``-shm`` beside it), upgraded to head, is instead a copy of a database this process
migrated once with the real upgrade — the same bytes the migrations write, since they store
nothing random. Everything else (an existing file at any revision, another revision than head,
PostgreSQL, ``evs db upgrade``, alembic's own command, child processes) runs the real
migrations, and so does any case the copy cannot serve or the store would refuse (a directory
problem the store names, another opener created the file first). A test that must see a new
file migrated for real marks itself ``real_migrations``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

Upgrade = Callable[..., Awaitable[None]]

_state: dict[str, object] = {"enabled": True}


def enabled(value: bool) -> None:
    """Switch the copying on or off (``real_migrations`` tests switch it off)."""
    _state["enabled"] = value


def _template_bytes(real: Upgrade) -> Callable[[], Awaitable[bytes]]:
    async def make() -> bytes:
        cached = _state.get("bytes")
        if isinstance(cached, bytes):
            return cached
        folder = Path(tempfile.mkdtemp(prefix="evs-fresh-"))
        try:
            path = folder / "template.db"
            await real(f"sqlite+aiosqlite:///{path}")
            conn = sqlite3.connect(path)
            try:  # everything in the main file: it is copied alone
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
            data = path.read_bytes()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        _state["bytes"] = data
        return data

    return make


def _taken(path: Path) -> bool:
    """Whether the file, or a journal of it, exists, or its directory has a problem the store
    names (missing, not writable): then the real upgrade decides, and says it."""
    from eventstore.backends.sqlite.driver import directory_problem

    return (any(Path(f"{path}{end}").exists() for end in ("", "-wal", "-shm", "-journal"))
            or directory_problem(str(path)) is not None)


def _place(path: Path, data: bytes) -> bool:
    """Write ``data`` as the new file ``path``; False when it cannot (the directory is missing
    or not writable, another opener made the file first)."""
    partial = Path(f"{path}.{uuid.uuid4().hex}.fresh")
    try:
        partial.write_bytes(data)
        os.link(partial, path)  # refuses if another opener made the file meanwhile
    except OSError:
        return False
    finally:
        partial.unlink(missing_ok=True)
    return True


def install() -> Callable[[], None]:
    """Wrap the SQLite open's upgrade; return the function that undoes it."""
    import eventstore.backends.sqlite.open as sqlite_open
    from eventstore.backends.sql import sqlite_file

    real: Upgrade = sqlite_open.upgrade  # type: ignore[attr-defined]
    template = _template_bytes(real)

    async def upgrade(url: str, revision: str = "head") -> None:
        path = sqlite_file(url)
        if (not _state["enabled"] or revision != "head" or path is None
                or await asyncio.to_thread(_taken, Path(path))):
            await real(url, revision)
            return
        data = await template()
        if not await asyncio.to_thread(_place, Path(path), data):
            await real(url, revision)

    sqlite_open.upgrade = upgrade  # type: ignore[attr-defined]

    def undo() -> None:
        sqlite_open.upgrade = real  # type: ignore[attr-defined,assignment]

    return undo
