"""The web UI addresses sessions by (app, user, id): two users of one app each hold a session
called ``s1``; each link names its session's app and user, each page shows that session, a bare
id lists the choices, and an answer lands in the session its page showed."""

from __future__ import annotations

import asyncio
import re
from html import unescape
from pathlib import Path

from _extras import require_extra

require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from _web_support import paused_log  # noqa: E402
from test_http import client, sign_in  # noqa: E402

from eventstore import open_store  # noqa: E402

USERS = ("ada", "bob")


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "users.db"

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            for user in USERS:
                await store.create_session(app_name="weather", user_id=user, session_id="s1",
                                           events=paused_log(user))

    asyncio.run(work())
    return db


def _versions(db: Path) -> dict[str, int]:
    async def work() -> dict[str, int]:
        async with await open_store(str(db)) as store:
            return {user: await store.version("s1", app_name="weather", user_id=user)
                    for user in USERS}

    return asyncio.run(work())


def test_web_links_name_app_and_user_and_each_page_shows_its_session(tmp_path: Path) -> None:
    http, _ = client(_db(tmp_path))
    with http:
        listing = http.get("/").text
        links = [unescape(h) for h in
                 re.findall(r'class="session-link" href="([^"]+)"', listing)]
        assert sorted(links) == ["/s/s1?app=weather&user=ada", "/s/s1?app=weather&user=bob"]
        for user, other in (("ada", "bob"), ("bob", "ada")):
            page = http.get("/s/s1", params={"app": "weather", "user": user})
            assert page.status_code == 200
            assert f"hi {user}" in page.text
            assert f"hi {other}" not in page.text
            pending = re.search(r'href="([^"]+)" id="pending-link"', page.text)
            assert pending is not None
            shown = http.get(unescape(pending.group(1))).text
            assert f"Costs {user} $0.10." in shown
            assert f"Costs {other}" not in shown
            detail = re.search(r'class="seq" href="([^"]+)"', page.text)
            assert detail is not None
            assert f"hi {user}" in http.get(unescape(detail.group(1))).text
            export = http.get("/export/s1", params={"app": "weather", "user": user})
            assert export.status_code == 200
            assert f"hi {user}" in export.text


def test_web_bare_id_lists_the_choices_when_two_users_hold_it(tmp_path: Path) -> None:
    http, _ = client(_db(tmp_path))
    with http:
        for path in ("/s/s1", "/pending/s1", "/export/s1", "/e/1/s1"):
            page = http.get(path)
            assert page.status_code == 300, path
            choices = [unescape(h) for h in re.findall(r'class="choice" href="([^"]+)"',
                                                       page.text)]
            assert choices == [f"{path}?app=weather&user=ada", f"{path}?app=weather&user=bob"]
            assert http.get(choices[1]).status_code == 200
        assert http.get("/s/s1", params={"user": "nobody"}).status_code == 404
        assert http.get("/s/s1", params={"user": "bob"}).status_code == 200


def test_web_answer_lands_in_the_session_its_page_showed(tmp_path: Path) -> None:
    db = _db(tmp_path)
    http, config = client(db, writes=True)
    with http:
        csrf = sign_in(http, config, "/pending/s1?app=weather&user=bob")
        before = _versions(db)
        bare = http.post("/answer/s1", data={"csrf": csrf, "call_id": "confirm-1",
                                             "action": "approve"}, follow_redirects=False)
        assert bare.status_code == 300
        assert _versions(db) == before
        page = http.get("/pending/s1", params={"app": "weather", "user": "bob"}).text
        form = re.search(r'<form method="post" action="([^"]+)" class="answer">', page)
        assert form is not None
        done = http.post(unescape(form.group(1)), data={
            "csrf": csrf, "call_id": "confirm-1", "action": "approve"},
            follow_redirects=False)
        assert done.status_code == 303, done.text
        assert "user=bob" in done.headers["location"]
        assert _versions(db) == {"ada": before["ada"], "bob": before["bob"] + 1}
