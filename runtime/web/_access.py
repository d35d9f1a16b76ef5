"""Who may read and who may write through ``evs web``: the token, the session cookie, the
per-session CSRF value.

The design is Jupyter's. ``evs web`` prints its URL with a per-start token once
(``/?token=…``). A request that carries the right token gets a session cookie (HttpOnly,
SameSite=Strict, signed with a per-start key the token never reveals) and a redirect to the
same URL without the token, so the token leaves the address bar and the history. Forms carry a
CSRF value derived from the cookie (an HMAC of it): useless without the cookie, which no page
can read (HttpOnly) and no other site's request carries (SameSite=Strict). No page embeds the
token, so a page fetched by another client holds no working write credential. Scripts may send
the token itself in the ``X-EVS-Token`` header instead (a browser cannot add that header to
another site's request without a CORS preflight, which this app never grants).

Nothing here does I/O; ``_app`` asks these questions of each request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

__all__ = ["Access", "TOKEN_HEADER"]

TOKEN_HEADER = "x-evs-token"
"""The header a script may send the token in instead of using the cookie."""


def _sign(key: bytes, purpose: bytes, value: str) -> str:
    return hmac.new(key, purpose + b"\0" + value.encode(), hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


@dataclass(kw_only=True)
class Access:
    """The credentials of one start of ``evs web``."""

    token: str
    """The printed token."""
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    """Signs the cookies and derives the CSRF values; never leaves the process."""

    @property
    def cookie_name(self) -> str:
        """The session cookie's name, distinct per start: cookies are shared by every port of
        a host, so two servers on one machine do not overwrite each other's."""
        return "evs-web-" + _sign(self.key, b"name", "")[:12]

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is this start's token."""
        return given is not None and _same(given, self.token)

    def new_cookie(self) -> str:
        """A fresh session cookie value (a nonce and its signature)."""
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{_sign(self.key, b'session', nonce)}"

    def session(self, request: Request) -> str | None:
        """The request's valid session cookie, or None (absent, forged, or of another
        start)."""
        value = request.cookies.get(self.cookie_name)
        if not value or "." not in value:
            return None
        nonce, _, signature = value.rpartition(".")
        return value if _same(signature, _sign(self.key, b"session", nonce)) else None

    def signed_in(self, request: Request) -> bool:
        """Whether the request holds a valid cookie or the token in ``X-EVS-Token``."""
        return self.session(request) is not None or self.token_ok(
            request.headers.get(TOKEN_HEADER))

    def csrf(self, cookie: str | None) -> str:
        """The CSRF value forms carry for the session ``cookie`` (empty without one)."""
        return _sign(self.key, b"csrf", cookie) if cookie else ""

    def csrf_ok(self, request: Request, given: str | None) -> bool:
        """Whether ``given`` is the CSRF value of the request's own valid cookie."""
        cookie = self.session(request)
        return cookie is not None and given is not None and _same(given, self.csrf(cookie))

    def sign_in(self, request: Request) -> Response | None:
        """For a GET whose query carries ``token``: the redirect to the same URL without it,
        setting the session cookie when the token is right (a wrong one sets nothing, and the
        page then says what is missing). None when the query holds no token."""
        if request.method != "GET" or "token" not in request.query_params:
            return None
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(kept)}" if kept else "")
        response = RedirectResponse(target, status_code=303,
                                    headers={"Cache-Control": "no-store",
                                             "Referrer-Policy": "no-referrer"})
        if self.token_ok(request.query_params.get("token")):
            response.set_cookie(self.cookie_name, self.session(request) or self.new_cookie(),
                                httponly=True, samesite="strict", path="/")
        return response
