"""What a request of ``evs web`` names and how its links name things: the session's
address (app, user), query numbers, URLs, display-safe text, and the refusal a page raises."""

from __future__ import annotations

from typing import Any, TypedDict
from urllib.parse import quote, urlencode

from eventstore import Session, SessionInfo

__all__ = ["PAGE_SIZES", "Refused", "address", "address_query", "clean", "page_size",
           "page_url", "quote_id", "to_number", "where_kw"]

PAGE_SIZES = (25, 50, 100, 200)


class Refused(Exception):
    """A request the app refuses, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Address(TypedDict):
    """The store methods' keywords that address one session (with its id)."""

    app_name: str
    user_id: str


def where_kw(info: SessionInfo) -> _Address:
    """The store methods' keywords that address the session ``info`` describes."""
    return {"app_name": info.app_name, "user_id": info.user_id}


def address(info: SessionInfo | Session) -> dict[str, str]:
    """The query parameters that address the session ``info`` describes (every link to a
    session page carries them: an id may be held by several apps or users)."""
    return {"app": info.app_name, "user": info.user_id}


def address_query(info: SessionInfo) -> str:
    """``address`` as a query string (``app=…&user=…``), for the templates' links."""
    return urlencode(address(info))


def quote_id(value: str) -> str:
    """``value`` quoted as one path segment (a session id may hold ``/``, ``?``, ``%``)."""
    return quote(value, safe="")


def clean(value: Any) -> str:
    """Text with control characters shown as escapes (ids may hold any character)."""
    text = str(value)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def to_number(raw: str | None, name: str) -> float | None:
    """The query parameter ``name`` (``raw``) as a number from 0 up, None when absent;
    Refused (400) otherwise."""
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError as exc:
        raise Refused(400, f"{name} must be a number, not {raw!r}.") from exc
    if value != value or value < 0 or value > 1e15:
        raise Refused(400, f"{name} must be a number from 0 up, not {raw!r}.")
    return value


def page_size(raw: str | None) -> int:
    """The ``limit`` parameter: one of ``PAGE_SIZES`` (50 when absent); Refused otherwise."""
    size = int(to_number(raw, "limit") or 50)
    if size not in PAGE_SIZES:
        raise Refused(400, f"limit must be one of {', '.join(map(str, PAGE_SIZES))}, "
                            f"not {raw!r}.")
    return size


def page_url(path: str, params: dict[str, str], **extra: Any) -> str:
    """``path`` with the non-empty ``params`` and the non-None ``extra`` as its query."""
    merged = {**{k: v for k, v in params.items() if v}, **{k: str(v) for k, v in extra.items()
                                                            if v is not None}}
    return f"{path}?{urlencode(merged)}" if merged else path

