"""The web UI at the HTTP level (Starlette's TestClient over real SQLite files): pages, paging,
filters, escaping, the sign-in, CSRF and origin checks of writes, read-only databases, damaged
rows. The Host check, the cookie flow and remote mode are in test_access.py."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from html import unescape
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from _extras import require_extra

require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from _web_client import client, sign_in, text_of  # noqa: E402
from _web_support import WAIT, evs, web_server  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from eventstore import (  # noqa: E402
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    open_store,
)


@pytest.fixture
def reader(paused_demo: tuple[Path, str]) -> Iterator[tuple[TestClient, str]]:
    db, sid = paused_demo
    http, _ = client(db)
    with http:
        yield http, sid


def test_web_sessions_list_links_the_demo_session(reader: tuple[TestClient, str]) -> None:
    http, sid = reader
    page = http.get("/")
    assert page.status_code == 200
    assert f'href="/s/{sid}?app=weather-demo&amp;user=demo-user"' in page.text
    assert http.get("/", params={"app": "nobody"}).text.count("session-link") == 0
    assert http.get("/", params={"q": sid[-6:]}).text.count("session-link") == 1
    assert http.get("/", params={"q": "zzzz-not-there"}).text.count("session-link") == 0
    assert http.get("/", params={"since": "99999999999"}).text.count("session-link") == 0


def test_web_sessions_list_pages_newest_first(tmp_path: Path) -> None:
    db = tmp_path / "many.db"

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            for n in range(60):
                sid = f"s{n:02d}"
                await store.create_session(app_name="many", user_id=f"u{n % 2}",
                                           session_id=sid)
                await store.append(sid, [Event(author="user", timestamp=1_000_000.0 + n,
                                               content=Content(role="user", parts=(
                                                   Part(text="hi"),)))], expected_version=0)

    asyncio.run(work())
    http, _ = client(db)
    with http:
        seen: list[str] = []
        url: str | None = "/?user=u1&limit=25"
        while url is not None:
            page = http.get(url)
            assert page.status_code == 200
            seen += re.findall(r'class="session-link" href="/s/([^"?]+)\?', page.text)
            found = re.search(r'href="([^"]+)" id="next"', page.text)
            url = unescape(found.group(1)) if found else None
        assert seen == [f"s{n:02d}" for n in range(59, 0, -2)]
        since = http.get("/", params={"since": "1000050", "q": "S5"}).text
        assert re.findall(r'class="session-link" href="/s/([^"?]+)\?', since) == [
            f"s{n}" for n in range(59, 49, -1)]
        assert http.get("/", params={"after": "nonsense"}).status_code == 400


def test_web_timeline_pairs_calls_with_responses(reader: tuple[TestClient, str]) -> None:
    http, sid = reader
    page = http.get(f"/s/{sid}")
    assert page.status_code == 200
    shown = text_of(page.text)
    # The two weather calls of #2 are answered by #4; the paid call waits for confirmation.
    assert shown.count("answered at #4") == 2
    assert "confirm paid_forecast" in shown
    assert "waiting" in shown
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


def test_web_filter_errors_only_keeps_the_error_events(reader: tuple[TestClient, str]) -> None:
    http, sid = reader
    page = http.get(f"/s/{sid}", params={"errors": "1"})
    seqs = re.findall(r'id="seq-(\d+)"', page.text)
    assert seqs == ["4", "7"]  # the failed Atlantis lookup, the confirmation placeholder
    by_tool = re.findall(r'id="seq-(\d+)"', http.get(f"/s/{sid}", params={"tool":
                                                                          "paid_forecast"}).text)
    assert by_tool == ["5", "7"]
    by_text = re.findall(r'id="seq-(\d+)"', http.get(f"/s/{sid}", params={"q": "atlantis"}).text)
    assert "4" in by_text
    assert "5" not in by_text


def test_web_event_detail_shows_json_and_state_diff(reader: tuple[TestClient, str]) -> None:
    http, sid = reader
    page = http.get(f"/e/4/{sid}")
    assert page.status_code == 200
    diff = page.text.split('id="diff"')[1].split("</table>")[0]
    assert "last_city" in diff
    assert "added" in diff
    assert "&#34;Paris&#34;" in diff
    unchanged = http.get(f"/e/5/{sid}").text.split('id="diff"')[1].split("</table>")[0]
    assert "no change" in unchanged


def test_web_bad_input_is_a_clear_error_not_a_500(reader: tuple[TestClient, str]) -> None:
    http, sid = reader
    assert http.get("/s/no-such-session").status_code == 404
    assert "no event at seq 999" in http.get(f"/e/999/{sid}").text
    refused = http.get(f"/s/{sid}", params={"limit": "7"})
    assert refused.status_code == 400
    assert "limit must be one of" in refused.text
    assert http.get(f"/s/{sid}", params={"after": "x"}).status_code == 400


def _long_session(db: Path, count: int) -> str:
    async def work() -> str:
        async with await open_store(str(db), auto_upgrade=True) as store:
            session = await store.create_session(app_name="bench", user_id="u",
                                                 session_id="long")
            batch = []
            for n in range(count // 2):
                call = FunctionCall(id=f"c{n}", name="tool", args={"n": n})
                batch.append(Event(author="agent", content=Content(role="model", parts=(
                    Part(function_call=call),))))
                batch.append(Event(author="user", content=Content(role="user", parts=(
                    Part(function_response=FunctionResponse(id=f"c{n}", name="tool",
                                                            response={"n": n})),)),
                    actions=EventActions(state_delta={"n": n})))
            await store.append(session.id, batch, expected_version=0)
            return session.id

    return asyncio.run(work())


def test_web_paging_walks_the_whole_log_once(tmp_path: Path) -> None:
    db = tmp_path / "long.db"
    sid = _long_session(db, 230)
    http, _ = client(db)
    seen: list[int] = []
    with http:
        url: str | None = f"/s/{sid}?from=start&limit=50"
        while url is not None:
            page = http.get(url)
            assert page.status_code == 200
            seen += [int(s) for s in re.findall(r'id="seq-(\d+)"', page.text)]
            found = re.search(r'href="([^"]+)" id="next"', page.text)
            url = found.group(1).replace("&amp;", "&") if found else None
        assert seen == list(range(1, 231))
        # The default page is the newest one, its calls paired across the page edge.
        newest = http.get(f"/s/{sid}").text
        assert re.findall(r'id="seq-(\d+)"', newest) == [str(n) for n in range(181, 231)]
        edge = http.get(f"/s/{sid}?after=0&limit=25").text
        assert "answered at <a href=\"#seq-26\">#26</a>" in edge


def test_web_event_page_folds_only_from_a_near_snapshot(tmp_path: Path) -> None:
    from runtime.web._view import FOLD_BUDGET

    db = tmp_path / "long.db"
    sid = _long_session(db, 2 * FOLD_BUDGET + 200)

    async def snapshot_then_more() -> None:
        async with await open_store(str(db)) as store:
            await store.state(sid)  # a snapshot at head, as every runner invocation leaves one
            head = await store.version(sid)
            await store.append(sid, [Event(author="user", actions=EventActions(
                state_delta={"n": "late", "extra": 1}, state_deletions=("gone",)))],
                expected_version=head)

    http, _ = client(db)
    with http:
        far = http.get(f"/e/{FOLD_BUDGET + 2}/{sid}").text  # sets n, no snapshot below it
        assert 'id="unfolded"' in far
        assert 'id="state"' not in far
        row = far.split('id="diff"')[1].split("</table>")[0]
        assert ">set<" in row
        assert f"{FOLD_BUDGET // 2}" in row
        folded = unescape(http.get(f"/e/{FOLD_BUDGET + 2}/{sid}", params={"fold": "1"}).text)
        assert 'id="unfolded"' not in folded
        assert f'"n": {FOLD_BUDGET // 2}' in folded.split('id="state"')[1]
        assert ">changed<" in folded.split('id="diff"')[1].split("</table>")[0]
    asyncio.run(snapshot_then_more())
    with http:
        last = 2 * FOLD_BUDGET + 201
        near = unescape(http.get(f"/e/{last}/{sid}").text)
        assert 'id="unfolded"' not in near
        diff = near.split('id="diff"')[1].split("</table>")[0]
        assert ">changed<" in diff
        assert ">added<" in diff
        assert "gone" not in diff  # deleting a key the state never had changes nothing
        state = near.split('id="state"')[1]
        assert '"n": "late"' in state
        [n_row] = [r for r in diff.split("<tr")[1:] if "<td>n</td>" in r]
        assert ">changed<" in n_row
        assert f"<pre>{FOLD_BUDGET + 99}</pre>" in n_row
        assert '<pre>"late"</pre>' in n_row


def test_web_escapes_ids_and_text(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    evil = "<script>alert(1)</script>\x07"

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            await store.create_session(app_name="a<b>", user_id="u", session_id=evil)
            await store.append(evil, [Event(author="<img src=x>", content=Content(
                role="user", parts=(Part(text="<b>hi</b>"),)))], expected_version=0)

    asyncio.run(work())
    http, _ = client(db)
    with http:
        for url in ("/", "/s/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%07",
                    "/e/1/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%07"):
            page = http.get(url)
            assert page.status_code == 200, url
            assert "<script>alert" not in page.text
            assert "<img src=x>" not in page.text
            assert "<b>hi</b>" not in page.text
            assert "\x07" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x07" in page.text


def _confirmation_id(http: TestClient, sid: str) -> str:
    found = re.search(r'name="call_id" value="([^"]+)"', http.get(f"/pending/{sid}").text)
    assert found is not None
    return found.group(1)


def test_web_approve_needs_the_cookie_its_csrf_and_same_origin(
    paused_demo: tuple[Path, str]
) -> None:
    db, sid = paused_demo
    http, config = client(db, writes=True)
    with http:
        csrf = sign_in(http, config, f"/pending/{sid}")
        assert csrf
        confirmation = _confirmation_id(http, sid)
        form = {"call_id": confirmation, "action": "approve"}
        for refused in (
            http.post(f"/answer/{sid}", data=form),
            http.post(f"/answer/{sid}", data={**form, "csrf": "wrong"}),
            http.post(f"/answer/{sid}", data={**form, "token": config.token}),
            http.post(f"/answer/{sid}", data={**form, "csrf": csrf},
                      headers={"Origin": "http://evil.example"}),
            http.post(f"/answer/{sid}", data={**form, "csrf": csrf},
                      headers={"Origin": "http://localhost:8765"}),  # allowed, not this page's
            http.post(f"/answer/{sid}", data={**form, "csrf": csrf},
                      headers={"Sec-Fetch-Site": "cross-site"}),
        ):
            assert refused.status_code == 403
        assert "confirmation" in http.get(f"/pending/{sid}").text
        assert '"kind": "confirmation"' in evs("pending", sid, "--db", str(db), "--json").stdout
        done = http.post(f"/answer/{sid}", data={**form, "csrf": csrf},
                         headers={"Origin": "http://127.0.0.1:8765"})
        assert done.status_code == 200  # after the redirect to the pending page
        assert "approved" in done.text
        # The same refusal as evs confirm for a second answer.
        again = http.post(f"/answer/{sid}", data={**form, "csrf": csrf})
        assert again.status_code == 400
        assert "already" in again.text
    resumed = evs("demo", "--db", str(db), "--resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Done: session {sid} is complete" in resumed.stdout


def test_web_a_script_may_send_the_token_in_a_header(paused_demo: tuple[Path, str]) -> None:
    db, sid = paused_demo
    http, config = client(db, writes=True)
    with http:
        [waiting] = orjson.loads(evs("pending", sid, "--db", str(db), "--json").stdout)[
            "pending"]
        form = {"call_id": waiting["confirmation_id"], "action": "reject"}
        wrong = http.post(f"/answer/{sid}", data=form, headers={"X-EVS-Token": "forged"})
        assert wrong.status_code == 403
        done = http.post(f"/answer/{sid}", data=form, headers={"X-EVS-Token": config.token})
        assert done.status_code == 200
        assert "rejected" in done.text


def test_web_writes_are_off_without_allow_writes(paused_demo: tuple[Path, str]) -> None:
    db, sid = paused_demo
    http, config = client(db)
    with http:
        sign_in(http, config)
        assert 'class="approve"' not in http.get(f"/pending/{sid}").text
        refused = http.post(f"/answer/{sid}", data={"call_id": "x", "action": "approve"},
                            headers={"X-EVS-Token": config.token})
        assert refused.status_code == 403
        assert "--allow-writes" in refused.text


def _unprivileged() -> list[str]:
    """A command prefix that runs a child as ``nobody`` when the tests run as root (root
    writes any file, so a read-only file is read-only only for another user); none otherwise.
    CAP_DAC_READ_SEARCH lets the child read root's files and folders, never write them."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    if os.environ.get("CI"):
        pytest.fail("running as root without setpriv: cannot check a read-only database")
    pytest.skip("running as root, and setpriv is missing to drop privileges")


def test_web_read_only_database_disables_writes(paused_demo: tuple[Path, str]) -> None:
    import httpx

    db, sid = paused_demo
    [waiting] = orjson.loads(evs("pending", sid, "--db", str(db), "--json").stdout)["pending"]
    confirmation = waiting["confirmation_id"]
    before = db.read_bytes()
    os.chmod(db, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        with web_server(db, prefix=_unprivileged()) as server, httpx.Client(
            base_url=server.url, timeout=WAIT
        ) as http:
            page = http.get(f"/pending/{sid}")
            assert page.status_code == 200
            assert "Writes are disabled" in page.text
            assert "read-only" in page.text
            assert 'class="approve"' not in page.text
            refused = http.post(f"/answer/{sid}", data={
                "action": "approve", "call_id": confirmation},
                headers={"X-EVS-Token": server.token})
            assert refused.status_code == 403
            assert "Writes are disabled" in refused.text
            assert http.get(f"/s/{sid}").status_code == 200
            assert http.get(f"/e/4/{sid}").status_code == 200
    finally:
        os.chmod(db, stat.S_IRUSR | stat.S_IWUSR)
    assert db.read_bytes() == before


def test_web_fork_follows_the_fork_rule(paused_demo: tuple[Path, str]) -> None:
    db, sid = paused_demo
    http, config = client(db, writes=True)
    with http:
        csrf = sign_in(http, config, f"/e/4/{sid}")
        inside = http.post(f"/fork/{sid}", data={"csrf": csrf, "at": "2"})
        assert inside.status_code == 400  # #2 calls get_weather, answered only at #4
        made = http.post(f"/fork/{sid}", data={"csrf": csrf, "at": "4", "new_id": "fork-1"})
        assert made.status_code == 200
        assert made.url.path == "/s/fork-1"
        assert "Forked from" in made.text
        assert re.findall(r'id="seq-(\d+)"', made.text) == ["1", "2", "3", "4"]


def test_web_damaged_row_shows_its_problem(paused_demo: tuple[Path, str]) -> None:
    db, sid = paused_demo
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE evs_events SET payload = CAST(X'7b6e6f' AS BLOB) WHERE seq = 3")
    http, _ = client(db)
    with http:
        page = http.get(f"/s/{sid}")
        assert page.status_code == 200
        row = page.text.split('id="seq-3"')[1].split("</li>")[0]
        assert "cannot be decoded" in row
        assert "problem(s)" in page.text
        detail = http.get(f"/e/3/{sid}")
        assert detail.status_code == 200
        assert "cannot be decoded" in detail.text
        assert http.get(f"/s/{sid}", params={"q": "paris"}).status_code == 200


def test_web_export_download_is_the_evs_export(paused_demo: tuple[Path, str],
                                                tmp_path: Path) -> None:
    db, sid = paused_demo
    http, _ = client(db)
    with http:
        got = http.get(f"/export/{sid}")
    assert got.status_code == 200
    assert "attachment" in got.headers["content-disposition"]
    target = tmp_path / "cli.jsonl"
    assert evs("export", sid, "--db", str(db), "--output", str(target)).returncode == 0
    assert got.content == target.read_bytes()


def test_web_live_stream_sends_a_new_event(paused_demo: tuple[Path, str]) -> None:
    db, sid = paused_demo
    http, _ = client(db)

    def first_row() -> list[str]:
        with http.stream("GET", f"/live/{sid}", params={"after": "7"}) as stream:
            lines = (line for line in stream.iter_lines() if line)
            assert next(lines).startswith(": live")
            return [next(lines) for _ in range(3)]

    with http, ThreadPoolExecutor(1) as pool:
        got = pool.submit(first_row).result(timeout=30)  # bounded: never hangs the suite
    assert got[0] == "id: 8"
    assert got[1] == "event: row"
    assert 'id="seq-8"' in got[2]


def test_web_exports_exactly_its_public_surface() -> None:
    import runtime.web

    assert runtime.web.__all__ == sorted(runtime.web.__all__)
    assert set(runtime.web.__all__) == {"WebConfig", "create_app"}


def test_web_package_data_ships_templates_and_static_files() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["runtime"]
    web = root / "runtime"
    shipped = {p for pattern in patterns for p in web.glob(pattern)}
    needed = {*web.glob("web/templates/*"), *web.glob("web/static/*")}
    assert needed
    assert needed <= shipped


@pytest.mark.parametrize("missing", ["starlette", "uvicorn", "jinja2"])
def test_web_without_the_extra_is_one_line_naming_it(
    missing: str, paused_demo: tuple[Path, str]
) -> None:
    import subprocess
    import sys

    db, _ = paused_demo
    child = subprocess.run(
        [sys.executable, "-c",
         f"import sys; sys.modules[{missing!r}] = None; sys.argv = ['evs', 'web', '--db', "
         f"{str(db)!r}]; from runtime.cli import main; main()"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert child.returncode == 1, child.stderr
    assert "pip install 'agent-eventstore[web]'" in child.stderr
    assert missing in child.stderr
    assert len(child.stderr.strip().splitlines()) == 1


def test_web_links_a_child_agent_session_both_ways(tmp_path: Path) -> None:
    from eventstore import child_session_id
    from runtime import Agent, AgentTool, ModelResponse, Runner, ScriptedModel

    db = tmp_path / "trip.db"
    child_id = child_session_id("trip", "call-book")

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            child = Agent(name="booker", model=ScriptedModel([ModelResponse(text="booked")]))
            parent = Agent(name="planner", tools=[AgentTool(child, store=store)],
                           model=ScriptedModel([
                               ModelResponse(function_calls=(FunctionCall(
                                   id="call-book", name="booker", args={"request": "Kyoto"}),)),
                               ModelResponse(text="done")]))
            runner = Runner(agent=parent, store=store, app_name="trip")
            await runner.create_session(user_id="u", session_id="trip")
            await runner.run(session_id="trip", user_id="u", new_message="book")

    asyncio.run(work())
    http, _ = client(db)
    with http:
        parent_page = http.get("/s/trip", params={"from": "start"}).text
        assert (f'class="child" href="/s/{quote(child_id, safe="")}?app=trip&amp;user=u"'
                in parent_page)
        child_page = http.get(f"/s/{quote(child_id, safe='')}").text
        assert 'id="parent"' in child_page
        assert 'href="/s/trip?app=trip&amp;user=u"' in child_page


@pytest.mark.parametrize("sid", [
    pytest.param("a/pending", id="like-a-page"),
    pytest.param("x/e/1", id="like-an-event"),
    pytest.param("50% off?#", id="url-characters"),
])
def test_web_any_session_id_reaches_its_own_pages(sid: str, tmp_path: Path) -> None:
    db = tmp_path / "ids.db"

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            for name in (sid, "a", "x"):
                await store.create_session(app_name="ids", user_id="u", session_id=name)
            await store.append(sid, [Event(author="user", content=Content(
                role="user", parts=(Part(text="mine"),)))], expected_version=0)

    asyncio.run(work())
    http, _ = client(db)
    with http:
        listing = http.get("/").text
        [link] = [h for h in re.findall(r'class="session-link" href="([^"]+)"', listing)
                  if h.startswith(f"/s/{quote(sid, safe='')}")]
        page = http.get(link)
        assert page.status_code == 200
        assert "“mine”" in page.text
        detail = re.search(r'class="seq" href="([^"]+)"', page.text)
        assert detail is not None
        assert "“mine”" in http.get(detail.group(1)).text
        pending = re.search(r'href="([^"]+)" id="pending-link"', page.text)
        assert pending is not None
        assert "Nothing is pending" in http.get(pending.group(1)).text


def test_web_artifacts_show_text_and_images_and_never_serve_html(tmp_path: Path) -> None:
    db = tmp_path / "art.db"
    png = bytes.fromhex("89504e470d0a1a0a") + b"\x00" * 16

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            await store.create_session(app_name="a", user_id="u", session_id="s")
            await store.save_artifact("s", "notes.txt", b"first <b>draft</b>",
                                      mime_type="text/plain")
            await store.save_artifact("s", "notes.txt", b"second", mime_type="text/plain")
            await store.save_artifact("s", "chart.png", png, mime_type="image/png")
            await store.save_artifact("s", "page.html", b"<script>x()</script>",
                                      mime_type="text/html")

    asyncio.run(work())
    http, _ = client(db)
    with http:
        listing = http.get("/artifacts/s").text
        assert "v0" in listing
        assert "v1" in listing
        first = http.get("/artifacts/s", params={"name": "notes.txt", "version": "0"}).text
        assert "first &lt;b&gt;draft&lt;/b&gt;" in first
        assert "second" in http.get("/artifacts/s", params={"name": "notes.txt"}).text
        image = http.get("/artifacts/s", params={"name": "chart.png"}).text
        assert '<img alt="chart.png" src="/artifact-raw/s?name=chart.png&amp;version=0">' in image
        raw = http.get("/artifact-raw/s", params={"name": "chart.png", "version": "0"})
        assert raw.headers["content-type"] == "image/png"
        assert raw.content == png
        html = http.get("/artifact-raw/s", params={"name": "page.html"})
        assert html.headers["content-type"] == "application/octet-stream"
        assert html.headers["content-disposition"] == "attachment"
        missing = http.get("/artifacts/s", params={"name": "notes.txt", "version": "9"})
        assert missing.status_code == 404


def test_web_serves_no_artifact_version_a_keyed_store_does_not_vouch_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A version whose signature was removed behind the store's back (or saved before the
    # key) is refused on the page and as raw bytes; the listing still names it.
    db = tmp_path / "keyed.db"
    key = "w" * 32

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True, signing_key=key) as store:
            await store.create_session(app_name="a", user_id="u", session_id="s")
            await store.save_artifact("s", "notes.txt", b"the real notes",
                                      mime_type="text/plain")

    asyncio.run(work())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE evs_artifacts SET signature = NULL")
    monkeypatch.setenv("EVS_SIGNING_KEY", key)
    http, _ = client(db)
    with http:
        assert "v0" in http.get("/artifacts/s").text
        page = http.get("/artifacts/s", params={"name": "notes.txt"})
        assert page.status_code == 400
        assert "not served by this keyed store" in unescape(page.text)
        assert "the real notes" not in page.text
        raw = http.get("/artifact-raw/s", params={"name": "notes.txt", "version": "0"})
        assert raw.status_code == 400
        assert b"the real notes" not in raw.content
