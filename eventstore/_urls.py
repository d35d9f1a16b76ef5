"""Store URLs as people write them, as SQLAlchemy needs them, and as messages show them.

A PostgreSQL URL may name several servers, as libpq and asyncpg spell it:
``postgresql+asyncpg://user@h1:5432,h2:5433/db?target_session_attrs=read-write`` reaches
whichever of them is the primary. asyncpg (the store's own connections) reads that form as it
is; SQLAlchemy (alembic's engine: ``evs db upgrade``, ``evs db current``, ``auto_upgrade``)
parses one host and port only, so every engine the package creates gets ``sqlalchemy_url``'s
translation: the hosts move into ``host=h1:5432&host=h2:5433`` query parameters, SQLAlchemy's
own spelling for asyncpg's fallback hosts.

``redact_url`` is the one way a URL is shown in messages: everything but the password stays
(scheme, user, every host and port, database, query), so the message names the servers tried.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["DEFAULT_PG_PORT", "HIDDEN", "host_list", "redact_url", "sqlalchemy_url"]

DEFAULT_PG_PORT = 5432
"""The port of a host written without one (libpq's default)."""

HIDDEN = "***"
"""What stands for a password in a shown URL."""

_PASSWORD_PARAMS = frozenset({"password", "passfile"})


def _split(url: str) -> tuple[str, str, str, str]:
    """``(scheme, authority, path, rest)``: ``rest`` is the query and fragment with their
    leading ``?``/``#``. The authority runs to the first ``/``, ``?`` or ``#`` after the last
    ``@`` ahead of the query (so a password may hold an unescaped ``/``; an ``@`` in the query
    is not mistaken for the user's)."""
    scheme, sep, tail = url.partition("://")
    if not sep:
        return "", "", url, ""
    query_at = tail.find("?")
    at = tail.rfind("@", 0, len(tail) if query_at < 0 else query_at)
    end = _authority_end(tail, at + 1)
    authority, rest = tail[:end], tail[end:]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    return scheme, authority, rest[:cut], rest[cut:]


def _authority_end(tail: str, start: int) -> int:
    ends = [i for i in (tail.find(c, start) for c in "/?#") if i >= 0]
    return min(ends) if ends else len(tail)


def host_list(authority: str) -> list[tuple[str, int | None]]:
    """The ``(host, port)`` pairs of a URL's host part (``h1:5432,[::1]:5433,h3``); a host
    without a port gets None. Hosts are percent-decoded (``%2Ftmp`` names a socket
    directory)."""
    hosts: list[tuple[str, int | None]] = []
    for item in authority.rpartition("@")[2].split(","):
        if item.startswith("["):
            host, _, port = item[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        if not host:
            continue
        hosts.append((urllib.parse.unquote(host), int(port) if port else None))
    return hosts


def redact_url(url: str) -> str:
    """``url`` with its password (in the user part, or a ``password=`` query parameter)
    replaced by ``***``; everything else as given. A URL without a password is returned
    unchanged."""
    scheme, authority, path, rest = _split(url)
    if not scheme:
        return url
    userinfo, at, hosts = authority.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":" + HIDDEN
    if rest.startswith("?"):
        query, hash_, frag = rest[1:].partition("#")
        pairs = [(k, HIDDEN if k in _PASSWORD_PARAMS else v)
                 for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)]
        if any(k in _PASSWORD_PARAMS for k, _ in pairs):
            query = urllib.parse.urlencode(pairs, safe=":/,*")
        rest = "?" + query + hash_ + frag
    return f"{scheme}://{userinfo}{at}{hosts}{path}{rest}"


def sqlalchemy_url(url: str) -> str | URL:
    """The URL to give ``create_async_engine`` for the store URL ``url``.

    A PostgreSQL URL naming several hosts becomes SQLAlchemy's asyncpg multi-host form (user,
    password, database and query kept; a host without a port gets 5432, or the ``port``
    parameter, since SQLAlchemy requires one per host); any other URL is returned as it is.
    """
    scheme, authority, path, rest = _split(url)
    if not scheme.startswith("postgresql") or "," not in authority.rpartition("@")[2]:
        return url
    from sqlalchemy.engine import URL

    userinfo, at, _ = authority.rpartition("@")
    user, colon, password = userinfo.partition(":")
    query_text = rest[1:].partition("#")[0] if rest.startswith("?") else ""
    query: dict[str, list[str]] = {}
    for key, value in urllib.parse.parse_qsl(query_text, keep_blank_values=True):
        query.setdefault(key, []).append(value)
    default_port = int(query.pop("port", [str(DEFAULT_PG_PORT)])[0].split(",")[0])
    hosts = [f"{host}:{port or default_port}" for host, port in host_list(authority)]
    return URL.create(
        scheme,
        username=urllib.parse.unquote(user) if at and user else None,
        password=urllib.parse.unquote(password) if colon else None,
        database=urllib.parse.unquote(path.lstrip("/")) or None,
        query={k: v[0] if len(v) == 1 else tuple(v) for k, v in query.items()}
        | {"host": tuple(hosts)},
    )
