"""What the pages show and send: an error's whole text behind a ``<details>``, a confirmation
row's link to its call, the pending page's words for its own buttons, and the export download
streamed in flat memory."""

from __future__ import annotations

import asyncio
import re
import tracemalloc
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

require_extra("starlette", "web")
require_extra("jinja2", "web")
require_extra("httpx", "web")

from test_http import client, sign_in, text_of  # noqa: E402

from eventstore import (  # noqa: E402
    Content,
    Event,
    FunctionCall,
    FunctionResponse,
    Part,
    _export,
    open_store,
)
from runtime.web import WebConfig, create_app  # noqa: E402

CAUSE = "the real cause: disk quota exceeded on /var/data"


def test_web_timeline_shows_the_whole_error_text(tmp_path: Path) -> None:
    db = tmp_path / "err.db"
    message = "Traceback (most recent call last): " + "frame; " * 40 + CAUSE
    call = FunctionCall(id="c1", name="save", args={"path": "/var/data/x"})

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            await store.create_session(app_name="a", user_id="u", session_id="s", events=[
                Event(author="agent", content=Content(role="model", parts=(
                    Part(function_call=call),))),
                Event(author="agent", content=Content(role="user", parts=(Part(
                    function_response=FunctionResponse(id="c1", name="save", response={
                        "error": {"kind": "execution_failed", "message": message}})),))),
            ])

    asyncio.run(work())
    http, _ = client(db)
    with http:
        page = http.get("/s/s", params={"from": "start"}).text
    row = page.split('id="seq-2"')[1].split("</li>")[0]
    assert "<details" in row
    assert CAUSE in unescape(row)
    shown = unescape(row.split("<summary>")[1].split("</summary>")[0])
    assert len(shown) <= 120  # the line stays one line; the rest opens on a click


def test_web_confirmation_row_links_to_its_call(paused: tuple[Path, str]) -> None:
    db, sid = paused
    http, _ = client(db)
    with http:
        page = http.get(f"/s/{sid}", params={"from": "start"}).text
        row = page.split('id="seq-5"')[1].split("</li>")[0]
        link = re.search(r'class="call-link" href="([^"]+)">#(\d+)</a>', row)
        assert link is not None
        seq = link.group(2)
        assert unescape(link.group(1)).endswith(f"#seq-{seq}")
        assert seq == "2"
        assert "c1" in row
        target = http.get(unescape(link.group(1)).split("#")[0]).text
        call_row = target.split(f'id="seq-{seq}"')[1].split("</li>")[0]
        assert "paid_lookup" in call_row
        assert "[c1]" in call_row


def test_web_pending_page_words_its_own_buttons(paused: tuple[Path, str]) -> None:
    db, sid = paused
    http, config = client(db, writes=True)
    with http:
        sign_in(http, config)
        answering = http.get(f"/pending/{sid}").text
        assert 'class="approve"' in answering
        reason = text_of(answering.split('class="reason">')[1].split("</p>")[0])
        assert "approve / reject buttons below" in reason
        assert "evs confirm" not in text_of(answering)
    reading, _ = client(db)
    with reading:
        told = reading.get(f"/pending/{sid}").text
        assert 'class="approve"' not in told
        assert "answer with evs confirm" in text_of(told)
        assert "evs confirm --db" in text_of(told)


async def _download(config: WebConfig, path: str) -> tuple[int, list[int], int, dict[str, str]]:
    """GET ``path`` straight through the ASGI app (no client buffers it): the status, the size
    of each body chunk sent, the peak traced memory while it was sent, and the headers."""
    application = create_app(config)
    chunks: list[int] = []
    start: dict[str, Any] = {}
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
             "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8765")], "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 8765)}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message.get("body"):
            chunks.append(len(message["body"]))

    async with application.router.lifespan_context(application):
        tracemalloc.start()
        try:
            await application(scope, receive, send)  # type: ignore[arg-type]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], chunks, peak, headers


def test_web_export_download_streams_in_flat_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "big.db"
    filler = "x" * 3_000

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            await store.create_session(app_name="a", user_id="u", session_id="big", events=[
                Event(author="user", content=Content(role="user", parts=(
                    Part(text=f"{n} {filler}"),))) for n in range(3_000)])

    asyncio.run(work())
    monkeypatch.setattr(_export, "EXPORT_PAGE", 100)
    status, chunks, peak, headers = asyncio.run(
        _download(WebConfig(db=str(db)), "/export/big"))
    size = sum(chunks)
    assert status == 200
    assert size > 9_000_000
    assert int(headers["content-length"]) == size
    assert len(chunks) >= size // (1 << 20)  # sent in chunks, not as one body
    assert max(chunks) <= 1 << 20
    # Held whole, the export alone costs its size (twice, with the copy sent).
    assert peak < size / 2, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB export"


@pytest.mark.parametrize(("reason", "said"), [
    pytest.param("answer with answer_confirmation(confirmation_id='x').",
                 "answer with the approve / reject buttons below.", id="confirmation"),
    pytest.param("is waiting for its result; supply it with submit_response().",
                 "is waiting for its result; supply it with the result form below.",
                 id="long-running"),
    pytest.param("decide with rerun_call() or supply its result with submit_response().",
                 "decide with evs rerun or supply its result with the result form below.",
                 id="in-doubt"),
])
def test_web_page_words_name_the_page_s_forms(reason: str, said: str) -> None:
    from eventstore.commands import prog
    from runtime.web._view import page_words

    assert page_words(reason) == said.replace("evs rerun", f"{prog()} rerun")
