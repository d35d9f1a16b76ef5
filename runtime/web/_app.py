"""The ``evs web`` ASGI application: server-rendered pages over one store.

Reads go through a read-only store opened at start; every write (approve, reject, a result,
a fork) goes through the same functions as ``evs confirm``/``respond``/``fork`` and only when
the app was started with writes allowed. Then every POST must carry the per-start token (form
field ``token`` or header ``X-EVS-Token``) and come from the app's own origin, so no cross-site
request can answer a confirmation. GET never writes. Every value shown is escaped (Jinja2
autoescape); a row that cannot be decoded is shown with its problem, never a 500.
"""

from __future__ import annotations

import hmac
import io
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlencode

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from eventstore import (
    AmbiguousSessionError,
    ArtifactNotFoundError,
    EventStore,
    EventStoreError,
    Session,
    SessionInfo,
    SessionNotFoundError,
    StoreUsageError,
    child_session_id,
    parent_link,
)
from eventstore._codec import EventKind
from eventstore.cli import CliError, open_existing
from eventstore.cli._common import sqlite_path
from eventstore.cli._maintain import _write_export
from eventstore.cli._render import short_json
from eventstore.cli._verify import check_log

from ._view import (
    FOLD_BUDGET,
    LOOKAROUND,
    SCAN_BUDGET,
    Filters,
    Row,
    decode_rows,
    own_changes,
    pair,
    pretty_json,
)

__all__ = ["WebConfig", "create_app"]

_HERE = Path(__file__).parent
PAGE_SIZES = (25, 50, 100, 200)
AUTO_VERIFY_LIMIT = 5_000
"""Sessions up to this many events are verified on every view; longer ones on request."""
_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self'; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@dataclass(kw_only=True)
class WebConfig:
    """How the app was started."""

    db: str
    """Database URL (as ``--db`` takes it)."""
    allow_writes: bool = False
    """Whether write actions are offered at all (``--allow-writes``)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """The per-start token every POST must carry."""
    poll_interval: float = 0.5
    """Seconds between polls of a live session."""


def _writable(db: str) -> tuple[bool, str]:
    """Whether the database can be written, and why not."""
    path = sqlite_path(db)
    if path is not None and not os.access(path, os.W_OK):
        return False, f"the database file {path} is read-only"
    if path is not None and not os.access(path.parent, os.W_OK):
        return False, f"the folder of {path} is read-only (SQLite needs it for its journal)"
    return True, ""


class _Refused(Exception):
    """A request the app refuses, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_app(config: WebConfig) -> Starlette:
    """Build the app for ``config``; the store is opened at startup and closed at shutdown."""
    env = Environment(loader=FileSystemLoader(_HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["json"] = pretty_json
    env.filters["short"] = lambda v, n=120: short_json(v, limit=n)
    env.filters["stamp"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    env.filters["clean"] = _clean
    env.filters["q"] = _q
    env.filters["at"] = _at
    holder: dict[str, EventStore] = {}
    writable, why_not = _writable(config.db)
    writes = config.allow_writes and writable
    writes_note = ("" if writes else
                   f"Writes are disabled: {why_not}." if config.allow_writes else
                   "Read-only: start evs web with --allow-writes to answer or fork.")

    def store() -> EventStore:
        return holder["store"]

    async def lookup(request: Request, sid: str) -> tuple[SessionInfo, str]:
        """The one place a page finds the session its URL names: the id in the path, and the
        ``app``/``user`` query parameters when given (links always carry them; a bare id is
        found when one app's user holds it). Returns the session and the key its rows are
        stored under. Raises SessionNotFoundError (a 404), AmbiguousSessionError (the page
        lists the choices)."""
        q = request.query_params
        app_name, user_id = q.get("app") or None, q.get("user") or None
        info = await store().session_info(sid, app_name=app_name, user_id=user_id)
        return info, await store().session_key(sid, app_name=info.app_name,
                                               user_id=info.user_id)

    def choices(request: Request, exc: AmbiguousSessionError) -> HTMLResponse:
        """The page of a bare id several (app, user) hold: a link to each one's page."""
        links = [(app_name, user_id, _url(request.url.path, {
            **dict(request.query_params), "app": app_name, "user": user_id}))
            for app_name, user_id in exc.choices]
        return page(request, "choose.html", status=300, sid=exc.session_id, links=links)

    def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            request=request, writes=writes, writes_note=writes_note, token=config.token,
            db=config.db, **values)
        return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)

    def failure(request: Request, status: int, message: str) -> HTMLResponse:
        return page(request, "error.html", status=status, message=message)

    def guarded(handler: Callable[[Request], Awaitable[Response]]
                ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except _Refused as exc:
                return failure(request, exc.status, str(exc))
            except AmbiguousSessionError as exc:
                return choices(request, exc)
            except SessionNotFoundError as exc:
                return failure(request, 404, str(exc))
            except (EventStoreError, CliError) as exc:
                return failure(request, 400, str(exc))
        return run

    async def check_post(request: Request) -> dict[str, str]:
        """Refuse a POST without writes, from another origin, or without the token."""
        if not writes:
            raise _Refused(403, writes_note)
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin is not None and origin.split("://", 1)[-1] != host:
            raise _Refused(403, f"Refused a request from another origin ({origin}).")
        if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
            raise _Refused(403, "Refused a cross-site request.")
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        given = request.headers.get("x-evs-token") or form.get("token", "")
        if not hmac.compare_digest(given.encode(), config.token.encode()):
            raise _Refused(403, "Refused: the token is missing or wrong (it is printed in the "
                                "terminal where evs web was started).")
        return form

    async def sessions(request: Request) -> Response:
        q = request.query_params
        app_name, user, text = q.get("app", ""), q.get("user", ""), q.get("q", "")
        since = _number(q.get("since"), "since")
        after = q.get("after") or None
        limit = _page_size(q.get("limit"))
        try:
            listing = await store().list_sessions_newest(
                app_name=app_name or None, user_id=user or None, id_contains=text or None,
                updated_since=since, after=after, limit=limit)
        except StoreUsageError as exc:
            raise _Refused(400, f"This is not a page of the sessions list: {exc}") from exc
        base = {"app": app_name, "user": user, "q": text, "since": q.get("since", ""),
                "limit": str(limit)}
        return page(request, "sessions.html", sessions=listing.sessions, filters=base,
                    first_page=after is None,
                    next_url=_url("/", base, after=listing.next_cursor)
                    if listing.next_cursor is not None else None,
                    newest_url=_url("/", base) if after is not None else None)

    async def session(request: Request) -> Response:
        sid = request.path_params["sid"]
        q = request.query_params
        info, key = await lookup(request, sid)
        where = _where(info)
        filters = Filters(kind=q.get("kind", ""), author=q.get("author", ""),
                          tool=q.get("tool", ""), errors=q.get("errors") == "1",
                          text=q.get("q", ""))
        limit = _page_size(q.get("limit"))
        raw_after = q.get("after")
        after = int(_number(raw_after, "after") or 0) if raw_after else None
        if after is None and not filters.active and q.get("from") != "start":
            after = max(0, info.version - limit)  # the newest page by default
        after = after or 0
        backend = store().backend
        scanned_to = after
        picked: list[Row] = []
        if not filters.active:
            rows = await backend.read(key, after=after, upto=None, backwards=False, limit=limit)
            picked = decode_rows(rows, store().decode)
            scanned_to = rows[-1].seq if rows else after
        else:
            budget = SCAN_BUDGET
            while budget > 0 and len(picked) < limit:
                rows = await backend.read(key, after=scanned_to, upto=None, backwards=False,
                                          limit=min(1000, budget))
                if not rows:
                    break
                for row in decode_rows(rows, store().decode):
                    scanned_to = row.seq
                    if filters.keeps(row.stored, row.event):
                        picked.append(row)
                        if len(picked) >= limit:
                            break
                budget -= len(rows)
        if picked:
            low, high = picked[0].seq, picked[-1].seq
            before = await backend.read(key, after=max(0, low - 1 - LOOKAROUND), upto=low - 1,
                                        backwards=False, limit=LOOKAROUND)
            later = await backend.read(key, after=high, upto=None, backwards=False,
                                       limit=LOOKAROUND)
            window = decode_rows(before, store().decode)
            if filters.active:
                middle = await backend.read(key, after=low - 1, upto=high, backwards=False,
                                            limit=None)
                window += decode_rows(middle, store().decode)
            else:
                window += picked
            window += decode_rows(later, store().decode)
            pair(picked, window)
            horizon = later[-1].seq if later else high
        else:
            horizon = after
        findings, verified = await _findings(key, info, q.get("verify") == "1")
        by_seq: dict[int | None, list[Any]] = {}
        for f in findings:
            by_seq.setdefault(f.seq, []).append(f)
        for row in picked:
            row.findings = by_seq.get(row.seq, [])
        base = {**filters.query(), "limit": str(limit), **where}
        more = scanned_to < info.version
        prev_after = max(0, after - limit) if not filters.active and after > 0 else None
        forks = await store().fork_links(sid, **where_kw(info))
        first = decode_rows(await backend.read(key, after=None, upto=None, backwards=False,
                                               limit=4), store().decode)
        parent = next((link for r in first if r.event is not None
                       and (link := parent_link(r.event)) is not None), None)
        return page(
            request, "session.html", parent=parent,
            children=await _children(sid, picked, info),
            info=info, rows=picked, filters=filters, limit=limit,
            horizon=horizon, at_head=horizon >= info.version, scanned_to=scanned_to,
            session_findings=by_seq.get(None, []), findings=findings, verified=verified,
            next_url=_url(f"/s/{_q(sid)}", base, after=scanned_to) if more else None,
            prev_url=_url(f"/s/{_q(sid)}", base, after=prev_after)
            if prev_after is not None else None,
            first_url=_url(f"/s/{_q(sid)}", base, **{"from": "start"}),
            verify_url=_url(f"/s/{_q(sid)}", {**base, "verify": "1"},
                            after=after if raw_after else None),
            forks=forks, kinds=sorted(EventKind.ALL),
            live=not filters.active and scanned_to >= info.version,
            quoted=_q(sid), addr=_at(info))

    async def _children(sid: str, rows: list[Row], info: SessionInfo) -> dict[str, str]:
        """Call id -> the child session of that call (an agent run as a tool), for the calls
        of ``rows``: the runtime's name for it, counted only when it links back (a child
        belongs to its parent's app and user)."""
        found: dict[str, str] = {}
        for row in rows:
            for call in row.event.function_calls() if row.event is not None else ():
                candidate = child_session_id(sid, call.id)
                try:
                    head = await store().read(candidate, limit=4, **where_kw(info))
                except (SessionNotFoundError, EventStoreError):
                    continue
                if any(parent_link(e) == (sid, call.id) for e in head):
                    found[call.id] = candidate
        return found

    async def _findings(key: str, info: SessionInfo, asked: bool) -> tuple[list[Any], bool]:
        if info.version > AUTO_VERIFY_LIMIT and not asked:
            return [], False
        rows = await store().backend.read(key, after=None, upto=None, backwards=False,
                                          limit=None)
        forks = await store().fork_links(info.id, **where_kw(info))
        found, _ = check_log(key, rows, version=info.version, decode=store().decode,
                             head=await store().backend.get_session(key),
                             signing_key=store().backend.signing_key,
                             copied_through=forks.origin.origin_seq if forks.origin else 0)
        return found, True

    async def event_detail(request: Request) -> Response:
        sid = request.path_params["sid"]
        seq = int(_number(request.path_params["seq"], "seq") or 0)
        info, key = await lookup(request, sid)
        rows = await store().backend.read(key, after=seq - 1, upto=seq, backwards=False,
                                          limit=1)
        if not rows:
            raise _Refused(404, f"Session {sid!r} has no event at seq {seq}.")
        [row] = decode_rows(rows, store().decode)
        around = await store().backend.read(key, after=max(0, seq - 1 - LOOKAROUND),
                                            upto=seq + LOOKAROUND, backwards=False, limit=None)
        pair([row], decode_rows(around, store().decode))
        try:
            stored: Any = orjson.loads(row.stored.payload)
        except orjson.JSONDecodeError:
            stored = row.stored.payload.decode("utf-8", "replace")
        state_error = None
        before_state: dict[str, Any] | None = None
        after_state: dict[str, Any] | None = None
        unfolded = 0
        try:
            snapshot = await store().backend.load_snapshot(key, upto=seq - 1)
            unfolded = seq - 1 - (snapshot.seq if snapshot is not None else 0)
            if unfolded <= FOLD_BUDGET or request.query_params.get("fold") == "1":
                before_state = await store().state(sid, at=seq - 1, **where_kw(info))
                after_state = await store().state(sid, at=seq, **where_kw(info))
                unfolded = 0
        except EventStoreError as exc:
            state_error = str(exc)
        diff = own_changes(row.event, before_state, after_state) if row.event is not None else []
        return page(request, "event.html", info=info, row=row, stored=stored,
                    state=after_state, diff=diff, state_error=state_error, unfolded=unfolded,
                    fold_budget=FOLD_BUDGET, quoted=_q(sid), addr=_at(info))

    async def pending_view(request: Request) -> Response:
        from runtime.cli._pending import pending_payload

        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        payload = await pending_payload(store(), sid, db=config.db, **where_kw(info))
        return page(request, "pending.html", info=info, payload=payload, quoted=_q(sid),
                    addr=_at(info), message=request.query_params.get("done", ""))

    async def answer(request: Request) -> Response:
        from runtime.cli._answer import _answer
        from runtime.replay import answer_confirmation, submit_response

        sid = request.path_params["sid"]
        form = await check_post(request)
        app_name = request.query_params.get("app") or None
        user_id = request.query_params.get("user") or None
        call_id = form.get("call_id", "")
        action = form.get("action", "")
        if action in ("approve", "reject"):
            decision = action == "approve"
            event = await _answer(config.db, sid, call_id, command="confirm",
                                  app_name=app_name, user_id=user_id,
                                  work=lambda s, app, user: answer_confirmation(
                                      s, session_id=sid, confirmation_id=call_id,
                                      confirmed=decision, app_name=app, user_id=user))
            done = f"Confirmation {call_id} {'approved' if decision else 'rejected'} " \
                   f"(seq {event.seq}); the agent acts on it on its next run."
        elif action == "respond":
            try:
                value = orjson.loads(form.get("result", ""))
            except orjson.JSONDecodeError as exc:
                raise _Refused(400, f"The result is not valid JSON: {exc}.") from exc
            if not isinstance(value, dict):
                raise _Refused(400, 'The result must be a JSON object; wrap a plain value as '
                                    '{"result": ...}.')
            event = await _answer(config.db, sid, call_id, command="respond",
                                  app_name=app_name, user_id=user_id,
                                  work=lambda s, app, user: submit_response(
                                      s, session_id=sid, call_id=call_id, response=value,
                                      app_name=app, user_id=user))
            done = f"Result of call {call_id} recorded (seq {event.seq})."
        else:
            raise _Refused(400, f"Unknown action {action!r}: approve, reject or respond.")
        where = {"app": app_name or "", "user": user_id or ""}
        return RedirectResponse(_url(f"/pending/{_q(sid)}", {**where, "done": done}),
                                status_code=303)

    async def fork(request: Request) -> Response:
        sid = request.path_params["sid"]
        form = await check_post(request)
        at = int(_number(form.get("at"), "at") or 0)
        new_id = form.get("new_id") or None
        async with await open_existing(config.db, read_only=False) as writer:
            made = await writer.fork(sid, at=at, new_session_id=new_id,
                                     app_name=request.query_params.get("app") or None,
                                     user_id=request.query_params.get("user") or None)
        return RedirectResponse(_url(f"/s/{_q(made.id)}", _where(made)), status_code=303)

    async def artifacts(request: Request) -> Response:
        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        listing = await store().list_artifacts(sid, **where_kw(info))
        versions: dict[str, list[Any]] = {}
        for filename in listing:
            versions[filename] = await store().artifact_versions(sid, filename,
                                                                 **where_kw(info))
        chosen = None
        name = request.query_params.get("name")
        if name is not None:
            number = _number(request.query_params.get("version"), "version")
            try:
                chosen = await store().load_artifact(
                    sid, name, version=None if number is None else int(number),
                    **where_kw(info))
            except ArtifactNotFoundError as exc:
                raise _Refused(404, str(exc)) from exc
        text = None
        if chosen is not None and not chosen.mime_type.startswith("image/"):
            text = chosen.data.decode("utf-8", "replace")
        return page(request, "artifacts.html", info=info, versions=versions, chosen=chosen,
                    text=text, image=chosen is not None and chosen.mime_type in _IMAGE_TYPES,
                    quoted=_q(sid), q=_q, addr=_at(info))

    async def artifact_raw(request: Request) -> Response:
        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        number = _number(request.query_params.get("version"), "version")
        found = await store().load_artifact(sid, request.query_params.get("name", ""),
                                            version=None if number is None else int(number),
                                            **where_kw(info))
        kind = found.mime_type if found.mime_type in _IMAGE_TYPES else "application/octet-stream"
        return Response(found.data, media_type=kind,
                        headers={**_SECURITY_HEADERS, "Content-Disposition": "inline"
                                 if kind in _IMAGE_TYPES else "attachment"})

    async def export(request: Request) -> Response:
        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        sink = io.BytesIO()
        await _write_export(store(), sid, sink, app_name=info.app_name, user_id=info.user_id)
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in sid)[:80] or "session"
        return Response(sink.getvalue(), media_type="application/x-ndjson",
                        headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"',
                                 **_SECURITY_HEADERS})

    async def live(request: Request) -> Response:
        sid = request.path_params["sid"]
        after = int(_number(request.query_params.get("after"), "after") or 0)
        info, key = await lookup(request, sid)
        template = env.get_template("_row.html")

        async def stream() -> AsyncIterator[bytes]:
            yield b": live\n\n"
            async for event in store().subscribe(sid, after=after,
                                                 poll_interval=config.poll_interval,
                                                 **where_kw(info)):
                rows = await store().backend.read(key, after=(event.seq or 1) - 1,
                                                  upto=event.seq, backwards=False, limit=1)
                decoded = decode_rows(rows, store().decode)
                context = await store().backend.read(
                    key, after=max(0, (event.seq or 0) - LOOKAROUND), upto=event.seq,
                    backwards=False, limit=None)
                pair(decoded, decode_rows(context, store().decode))
                for row in decoded:
                    html = template.render(row=row, quoted=_q(sid), at_head=True,
                                           horizon=row.seq, addr=_at(info))
                    data = "".join(f"data: {line}\n" for line in html.splitlines())
                    yield f"id: {row.seq}\nevent: row\n{data}\n".encode()
                if await request.is_disconnected():
                    return

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", **_SECURITY_HEADERS})

    async def not_found(request: Request, exc: Exception) -> Response:
        return failure(request, 404, "No such page.")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        holder["store"] = await open_existing(config.db, read_only=True)
        try:
            yield
        finally:
            await holder["store"].aclose()

    routes = [
        Route("/", guarded(sessions)),
        Route("/e/{seq}/{sid:path}", guarded(event_detail)),
        Route("/pending/{sid:path}", guarded(pending_view)),
        Route("/answer/{sid:path}", guarded(answer), methods=["POST"]),
        Route("/fork/{sid:path}", guarded(fork), methods=["POST"]),
        Route("/artifact-raw/{sid:path}", guarded(artifact_raw)),
        Route("/artifacts/{sid:path}", guarded(artifacts)),
        Route("/export/{sid:path}", guarded(export)),
        Route("/live/{sid:path}", guarded(live)),
        Route("/s/{sid:path}", guarded(session)),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found})


class _Address(TypedDict):
    """The store methods' keywords that address one session (with its id)."""

    app_name: str
    user_id: str


def where_kw(info: SessionInfo) -> _Address:
    """The store methods' keywords that address the session ``info`` describes."""
    return {"app_name": info.app_name, "user_id": info.user_id}


def _where(info: SessionInfo | Session) -> dict[str, str]:
    """The query parameters that address the session ``info`` describes (every link to a
    session page carries them: an id may be held by several apps or users)."""
    return {"app": info.app_name, "user": info.user_id}


def _at(info: SessionInfo) -> str:
    """``_where`` as a query string (``app=…&user=…``), for the templates' links."""
    return urlencode(_where(info))


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _clean(value: Any) -> str:
    """Text with control characters shown as escapes (ids may hold any character)."""
    text = str(value)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _number(raw: str | None, name: str) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError as exc:
        raise _Refused(400, f"{name} must be a number, not {raw!r}.") from exc
    if value != value or value < 0 or value > 1e15:
        raise _Refused(400, f"{name} must be a number from 0 up, not {raw!r}.")
    return value


def _page_size(raw: str | None) -> int:
    size = int(_number(raw, "limit") or 50)
    if size not in PAGE_SIZES:
        raise _Refused(400, f"limit must be one of {', '.join(map(str, PAGE_SIZES))}, "
                            f"not {raw!r}.")
    return size


def _url(path: str, params: dict[str, str], **extra: Any) -> str:
    merged = {**{k: v for k, v in params.items() if v}, **{k: str(v) for k, v in extra.items()
                                                            if v is not None}}
    return f"{path}?{urlencode(merged)}" if merged else path

