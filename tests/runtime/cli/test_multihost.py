"""A multi-host PostgreSQL URL (``h1:port,h2:port/db?target_session_attrs=read-write``, as
libpq and asyncpg spell it) works for ``evs db upgrade``, ``evs db current``, ``open_store`` and
``open_store(auto_upgrade=True)``; errors show it whole, the password hidden.

Before, alembic's engine parsed it with a one-host parser ("internal error (ValueError:
invalid literal for int() …)"), and messages dropped the user and scheme. The first host is a
closed port, so every connection has to fall back to the second (the shared test server).
"""

from __future__ import annotations

import asyncio
import socket

import orjson
import pytest
from _cli_support import invoke

from eventstore import Content, Event, Part, StorageError, open_store
from eventstore._migrate import head_revision

pytestmark = pytest.mark.postgres


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _multi_host(url: str, *, password: str | None = None) -> str:
    """``url`` (one host) with a dead host before it and ``target_session_attrs``."""
    scheme, rest = url.split("://", 1)
    user, hosts_db = rest.rsplit("@", 1)
    hosts, db = hosts_db.split("/", 1)
    user = user if password is None else f"{user.split(':')[0]}:{password}"
    return (f"{scheme}://{user}@127.0.0.1:{_closed_port()},{hosts}/{db}"
            "?target_session_attrs=read-write")


def test_multihost_url_db_upgrade_and_current(empty_postgres_url: str) -> None:
    url = _multi_host(empty_postgres_url)
    current = invoke("db", "current", "--db", url)
    assert current.exit_code == 0, current.stderr
    assert "no schema" in current.stdout
    upgraded = invoke("db", "upgrade", "--db", url)
    assert upgraded.exit_code == 0, upgraded.stderr
    assert orjson.loads(invoke("db", "current", "--db", url, "--json").stdout)[
        "current"] == head_revision()


def test_multihost_url_open_store(empty_postgres_url: str) -> None:
    url = _multi_host(empty_postgres_url)

    async def main() -> list[int]:
        store = await open_store(url, auto_upgrade=True)
        async with store:
            assert store.url == url
            await store.create_session(app_name="a", user_id="u", session_id="s")
            stored = await store.append("s", Event(author="user", content=Content(
                role="user", parts=(Part(text="hi"),))), expected_version=None)
            return [e.seq for e in stored]

    assert asyncio.run(main()) == [1]

    async def again() -> int:
        async with await open_store(url) as store:
            return len((await store.list_sessions()).sessions)

    assert asyncio.run(again()) == 1


def test_multihost_url_errors_show_it_without_password(empty_postgres_url: str) -> None:
    # A database that does not exist: the error names every host, the user and the scheme.
    url = _multi_host(empty_postgres_url, password="hunter2").rsplit("/", 1)[0] + "/nope?x=1"
    url = url.replace("?x=1", "?target_session_attrs=read-write")

    async def main() -> str:
        with pytest.raises(StorageError) as caught:
            await open_store(url)
        return str(caught.value)

    message = asyncio.run(main())
    assert "hunter2" not in message
    shown = url.replace("hunter2", "***")
    assert shown in message, message
    upgraded = invoke("db", "upgrade", "--db", url)
    assert upgraded.exit_code == 1
    assert "hunter2" not in upgraded.stderr
    assert "internal error" not in upgraded.stderr
    assert shown in upgraded.stderr, upgraded.stderr
