"""Driving ``evs web`` in process (Starlette's TestClient over a real database), as a person
does: sign in with the printed URL, read pages, answer from the pending page's forms (the
cookie, the form's CSRF value, same origin). Used by the web tests and by the framework doors'
tests of their sessions in the web inspector."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape
from pathlib import Path

from starlette.testclient import TestClient

from runtime.web import WebConfig, create_app

ORIGIN = "http://127.0.0.1:8765"
"""The origin the test client's pages are served from."""


def client(db: Path | str, *, writes: bool = False, host: str = "127.0.0.1",
           allowed: tuple[str, ...] = ()) -> tuple[TestClient, WebConfig]:
    """The web app on ``db`` (writes allowed when ``writes``) and its configuration."""
    config = WebConfig(db=str(db), allow_writes=writes, poll_interval=0.05, host=host,
                       allowed_hosts=allowed)
    return TestClient(create_app(config), base_url=ORIGIN), config


def sign_in(http: TestClient, config: WebConfig, path: str = "/") -> str:
    """Open ``path`` with the printed URL's token, as the user does, and return the CSRF value
    the signed-in pages' forms carry."""
    opened = http.get(f"{path}{'&' if '?' in path else '?'}token={config.token}")
    assert opened.status_code == 200, opened.text
    assert "token=" not in str(opened.url)
    found = re.search(r'name="csrf" value="([^"]+)"', http.get(path).text)
    return found.group(1) if found else ""


def text_of(html: str) -> str:
    """The page's text, tags dropped, white space folded."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@dataclass(frozen=True)
class AnswerForm:
    """One answer form of a pending page."""

    url: str
    """Where it posts (the session's ``/answer/…`` address)."""
    fields: dict[str, str]
    """Its hidden fields: ``csrf``, ``call_id``, and ``action`` for a result form (a
    confirmation's buttons carry ``approve`` / ``reject``)."""

    def post(self, http: TestClient, **fields: str) -> str:
        """Submit it, as its button does (``fields``: the button's ``action``, a ``result``),
        from the page's origin; return the page it leads to (the pending page, saying what was
        recorded)."""
        done = http.post(self.url, data={**self.fields, **fields}, headers={"Origin": ORIGIN})
        assert done.status_code == 200, done.text
        return done.text


def answer_forms(html: str) -> list[AnswerForm]:
    """The answer forms of a pending page, in page order."""
    found = re.findall(r'<form method="post" action="(/answer/[^"]*)"[^>]*>(.*?)</form>', html,
                       re.S)
    return [AnswerForm(url=unescape(url), fields={
        name: unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)
    }) for url, form in found]


def answer_pending(http: TestClient, config: WebConfig, sid: str, *, expect: str,
                   **fields: str) -> str:
    """Sign in on session ``sid``'s pending page, check it lists ``expect``, submit its only
    answer form with ``fields`` (``action="approve"``, a ``result``) and return the page the
    answer leads to."""
    sign_in(http, config, f"/pending/{sid}")
    page = http.get(f"/pending/{sid}").text
    assert expect in text_of(page)
    [form] = answer_forms(page)
    return form.post(http, **fields)
