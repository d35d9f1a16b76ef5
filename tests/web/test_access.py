"""Who reaches ``evs web`` and with what: the Host check against DNS rebinding (421), the
token that the printed URL carries once and the cookie it sets, the CSRF value derived from
the cookie, and remote mode (reads need the token; writes need ``--allow-remote``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from _extras import require_extra

require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from starlette.testclient import TestClient  # noqa: E402
from test_http import client, sign_in  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from eventstore import open_store  # noqa: E402
from runtime.cli import app  # noqa: E402
from runtime.replay import session_pending  # noqa: E402
from runtime.web import WebConfig, create_app  # noqa: E402


def _pages(sid: str) -> list[str]:
    return ["/", f"/s/{sid}", f"/e/4/{sid}", f"/pending/{sid}", f"/artifacts/{sid}",
            f"/export/{sid}", "/no-such-page"]


def _waiting(db: Path, sid: str) -> str:
    """The confirmation id the demo session waits for (``session_pending``, in process)."""

    async def work() -> str:
        async with await open_store(str(db)) as store:
            [item] = list(await session_pending(store, sid))
        assert item.kind == "confirmation"
        assert item.confirmation_id is not None
        return item.confirmation_id

    return asyncio.run(work())


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example",
                                  "localhost.evil.example:8765", ""])
def test_web_refuses_a_host_it_was_not_started_for_with_421_and_no_data(
    paused: tuple[Path, str], host: str
) -> None:
    db, sid = paused
    http, _ = client(db)
    with http:
        for path in [*_pages(sid), f"/live/{sid}", "/static/evs.js"]:
            got = http.get(path, headers={"Host": host})
            assert got.status_code == 421, path
            assert got.headers["content-type"].startswith("text/plain")
            assert sid not in got.text
            assert str(db) not in got.text
            assert len(got.text.splitlines()) == 1
        for name in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
            assert http.get("/", headers={"Host": name}).status_code == 200, name


def test_web_a_rebound_page_cannot_read_the_token_or_answer(
    paused: tuple[Path, str]
) -> None:
    """The attack of the issue: evil.example rebinds its name to 127.0.0.1; the browser then
    sends evil.example as Host and as Origin, which agree with each other."""
    db, sid = paused
    config = WebConfig(db=str(db), allow_writes=True)
    confirmation = _waiting(db, sid)
    with TestClient(create_app(config), base_url="http://evil.example:8765") as rebound:
        assert rebound.get(f"/pending/{sid}").status_code == 421
        assert rebound.get(f"/?token={config.token}").status_code == 421
        for extra in ({"token": config.token}, {}):
            answered = rebound.post(
                f"/answer/{sid}", data={"call_id": confirmation, "action": "approve", **extra},
                headers={"Origin": "http://evil.example:8765", "X-EVS-Token": config.token},
                follow_redirects=False)
            assert answered.status_code == 421
    assert _waiting(db, sid) == confirmation


def test_web_refuses_an_origin_it_was_not_started_for(paused: tuple[Path, str]) -> None:
    db, sid = paused
    http, config = client(db, writes=True)
    with http:
        for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:8765"):
            got = http.post(f"/answer/{sid}", data={"call_id": "x", "action": "approve"},
                            headers={"Origin": origin, "X-EVS-Token": config.token})
            assert got.status_code == 403, origin
    assert _waiting(db, sid)


def test_web_an_allowed_host_is_answered(paused: tuple[Path, str]) -> None:
    db, _ = paused
    http, _ = client(db, allowed=("proxy.example", "other.example:9000"))
    with http:
        assert http.get("/", headers={"Host": "proxy.example"}).status_code == 200
        assert http.get("/", headers={"Host": "proxy.example:443"}).status_code == 200
        assert http.get("/", headers={"Host": "other.example:9000"}).status_code == 200
        assert http.get("/", headers={"Host": "other.example:9001"}).status_code == 421


def test_web_no_page_embeds_the_token(paused: tuple[Path, str]) -> None:
    db, sid = paused
    http, config = client(db, writes=True)
    with http:
        sign_in(http, config)
        pending = http.get(f"/pending/{sid}").text
        assert 'class="approve"' in pending  # signed in: the forms are there
        for path in _pages(sid):
            page = http.get(path)
            assert config.token not in page.text, path
            assert config.token not in str(page.headers), path


def test_web_the_printed_url_sets_the_cookie_and_drops_the_token(
    paused: tuple[Path, str]
) -> None:
    db, sid = paused
    http, config = client(db, writes=True)
    with http:
        wrong = http.get(f"/pending/{sid}?token=forged", follow_redirects=False)
        assert wrong.status_code == 303
        assert "set-cookie" not in wrong.headers
        assert 'class="approve"' not in http.get(f"/pending/{sid}").text
        assert "open the URL evs web printed" in http.get(f"/pending/{sid}").text
        opened = http.get(f"/pending/{sid}?app=weather&token={config.token}",
                          follow_redirects=False)
        assert opened.status_code == 303
        assert opened.headers["location"] == f"/pending/{sid}?app=weather"
        cookie = opened.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/"):
            assert attribute.lower() in cookie.lower()
        assert config.token not in cookie
        page = http.get(opened.headers["location"])
        assert 'class="approve"' in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        done = http.post(f"/answer/{sid}", data={
            "csrf": csrf.group(1), "call_id": _waiting(db, sid), "action": "approve"})
        assert done.status_code == 200
        assert "approved" in done.text


def test_web_a_csrf_value_without_its_cookie_is_refused(paused: tuple[Path, str]) -> None:
    db, sid = paused
    base = "http://127.0.0.1:8765"
    config = WebConfig(db=str(db), allow_writes=True)
    confirmation = _waiting(db, sid)
    form = {"call_id": confirmation, "action": "approve"}
    with TestClient(create_app(config), base_url=base) as http:
        csrf = sign_in(http, config, f"/pending/{sid}")
        assert csrf
        [(name, value)] = http.cookies.items()
        http.cookies.clear()  # another client: it holds the page's CSRF value, not the cookie
        bare = http.post(f"/answer/{sid}", data={**form, "csrf": csrf})
        assert bare.status_code == 403
        assert "not signed in" in bare.text
        sign_in(http, config)  # a session of its own: the first one's CSRF value is wrong here
        crossed = http.post(f"/answer/{sid}", data={**form, "csrf": csrf})
        assert crossed.status_code == 403
        assert "CSRF" in crossed.text
        http.cookies.clear()
        http.cookies.set(name, value.rpartition(".")[0] + ".0000")
        assert http.post(f"/answer/{sid}", data={**form, "csrf": csrf}).status_code == 403
    # A cookie of another start of evs web is no cookie of this one.
    with TestClient(create_app(WebConfig(db=str(db), allow_writes=True)), base_url=base,
                    cookies={name: value}) as restarted:
        assert restarted.post(f"/answer/{sid}", data={**form, "csrf": csrf}).status_code == 403
    assert _waiting(db, sid) == confirmation


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_web_a_remote_host_needs_the_token_for_reads(
    paused: tuple[Path, str], host: str
) -> None:
    db, sid = paused
    http, config = client(db, host=host)
    with http:
        for path in _pages(sid):
            refused = http.get(path)
            assert refused.status_code == 403, path
            assert sid not in refused.text
            assert str(db) not in refused.text
            assert "open the URL it printed" in refused.text
        assert http.get("/", headers={"Host": "evil.example"}).status_code == 421
        with_header = http.get(f"/s/{sid}", headers={"X-EVS-Token": config.token})
        assert with_header.status_code == 200
        sign_in(http, config)
        assert http.get(f"/s/{sid}").status_code == 200
        assert http.get(f"/export/{sid}").status_code == 200


def test_web_every_address_bind_answers_address_literals_not_names(
    paused: tuple[Path, str]
) -> None:
    db, _ = paused
    http, config = client(db, host="0.0.0.0")
    with http:
        headers = {"X-EVS-Token": config.token}
        for name in ("192.0.2.10:8765", "[2001:db8::1]:8765", "10.0.0.2"):
            assert http.get("/", headers={**headers, "Host": name}).status_code == 200, name
        assert http.get("/", headers={**headers, "Host": "rebound.example"}).status_code == 421


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """``uvicorn.run`` replaced by a recorder: ``evs web`` returns instead of serving."""
    import uvicorn

    started: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(kw))
    return started


def test_web_writes_on_a_remote_host_need_allow_remote(
    paused: tuple[Path, str], no_server: list[dict[str, object]]
) -> None:
    db, _ = paused
    runner = CliRunner()
    refused = runner.invoke(app, ["web", "--db", str(db), "--host", "0.0.0.0",
                                  "--allow-writes"])
    assert refused.exit_code == 1
    assert "--allow-remote" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert no_server == []
    started = runner.invoke(app, ["web", "--db", str(db), "--host", "0.0.0.0",
                                  "--allow-writes", "--allow-remote"])
    assert started.exit_code == 0, started.output
    assert "WARNING" in started.output
    assert "?token=" in started.output
    assert no_server == [{"host": "0.0.0.0", "port": 8765, "log_level": "warning"}]


def test_web_prints_the_token_only_in_the_url_and_only_when_needed(
    paused: tuple[Path, str], no_server: list[dict[str, object]]
) -> None:
    db, _ = paused
    runner = CliRunner()
    reading = runner.invoke(app, ["web", "--db", str(db), "--port", "9"])
    assert reading.exit_code == 0, reading.output
    assert "http://127.0.0.1:9/  (" in reading.output
    assert "?token=" not in reading.output
    writing = runner.invoke(app, ["web", "--db", str(db), "--allow-writes"])
    [line] = [x for x in writing.output.splitlines() if "?token=" in x]
    assert re.match(r"evs web: http://127\.0\.0\.1:8765/\?token=[\w-]+  \(", line)
    bad = runner.invoke(app, ["web", "--db", str(db), "--allowed-host", "a/b"])
    assert bad.exit_code == 1
    assert "--allowed-host 'a/b'" in bad.output
