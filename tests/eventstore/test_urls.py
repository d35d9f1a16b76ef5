"""Store URLs: several PostgreSQL hosts reach SQLAlchemy in its own spelling, and every shown URL
keeps scheme, user, hosts, database and query, hiding only the password."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import URL

from eventstore._urls import redact_url, sqlalchemy_url

MULTI = "postgresql+asyncpg://h1:5432,h2:5433/db?target_session_attrs=read-write"


@pytest.mark.parametrize(("url", "shown"), [
    pytest.param(MULTI, MULTI, id="multi-host-no-password"),
    pytest.param("postgresql+asyncpg://bob:secret@h1:5432,h2:5433/db?target_session_attrs=any",
                 "postgresql+asyncpg://bob:***@h1:5432,h2:5433/db?target_session_attrs=any",
                 id="multi-host-password"),
    pytest.param("postgresql+asyncpg://bob:s3/cr@t@db.example:6432/evs",
                 "postgresql+asyncpg://bob:***@db.example:6432/evs", id="password-with-slash-at"),
    pytest.param("postgresql+asyncpg://bob@h/db?password=secret&sslmode=require",
                 "postgresql+asyncpg://bob@h/db?password=***&sslmode=require",
                 id="password-parameter"),
    pytest.param("postgresql+asyncpg://bob@h1,h2/db", "postgresql+asyncpg://bob@h1,h2/db",
                 id="no-ports"),
    pytest.param("sqlite+aiosqlite:///dir/a@b.db", "sqlite+aiosqlite:///dir/a@b.db", id="sqlite"),
    pytest.param("memory://", "memory://", id="memory"),
])
def test_redact_url_hides_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "secret" not in redact_url(url)


def test_sqlalchemy_url_moves_hosts_into_the_query() -> None:
    url = sqlalchemy_url("postgresql+asyncpg://bob:pw@h1:5432,h2:5433/db"
                         "?target_session_attrs=read-write")
    assert isinstance(url, URL)
    assert url.host is None
    assert url.port is None
    assert url.username == "bob"
    assert url.password == "pw"
    assert url.database == "db"
    assert url.query == {"host": ("h1:5432", "h2:5433"), "target_session_attrs": "read-write"}


def test_sqlalchemy_url_gives_each_host_a_port() -> None:
    url = sqlalchemy_url("postgresql+asyncpg://u@h1,h2:7000/db?port=6000")
    assert isinstance(url, URL)
    assert url.query == {"host": ("h1:6000", "h2:7000")}
    bare = sqlalchemy_url("postgresql+asyncpg://u@h1,h2/db")
    assert isinstance(bare, URL)
    assert bare.query == {"host": ("h1:5432", "h2:5432")}


def test_sqlalchemy_url_is_what_the_asyncpg_dialect_connects_to() -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(sqlalchemy_url(MULTI))
    _, options = engine.dialect.create_connect_args(engine.url)
    assert options["host"] == ["h1", "h2"]
    assert options["port"] == [5432, 5433]
    assert options["target_session_attrs"] == "read-write"
    assert options["database"] == "db"


@pytest.mark.parametrize("url", [
    "postgresql+asyncpg://bob:pw@localhost:5432/db", "sqlite+aiosqlite:///x.db", "memory://",
])
def test_sqlalchemy_url_leaves_one_host_alone(url: str) -> None:
    assert sqlalchemy_url(url) == url
