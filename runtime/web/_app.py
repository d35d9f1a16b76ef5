"""The ``evs web`` ASGI application: server-rendered pages over one store.

Reads go through a read-only store opened at start; every write (approve, reject, a result,
a fork) goes through the same functions as ``evs confirm``/``respond``/``fork`` and only when
the app was started with writes allowed. Every request first passes the Host/Origin check
(``runtime._host_check``: 421 for a name the server was not started for, so a page that
rebinds its name to this machine reads nothing). A POST then needs the session cookie that
the printed URL's token sets and the form's CSRF value derived from it (``_access``; or the
token in ``X-EVS-Token``), and must come from the page's own origin; no page embeds the
token. Bound to a non-loopback address, reads need the cookie (or the token) too. GET never
writes. Every value shown is escaped (Jinja2 autoescape); a row that cannot be decoded is
shown with its problem, never a 500.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
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
    SessionInfo,
    SessionNotFoundError,
    StoreUsageError,
    child_session_id,
    parent_link,
)
from eventstore._codec import EventKind
from eventstore._export import write_export
from eventstore.commands import CliError, open_existing
from eventstore.commands._render import short_json
from eventstore.commands._verify import check_log

from .._host_check import HostCheck, HostPolicy
from ..cli._words import command_words
from ._access import TOKEN_HEADER, Access
from ._config import WebConfig, writable
from ._params import (
    Refused,
    address,
    address_query,
    clean,
    page_size,
    page_url,
    quote_id,
    to_number,
    where_kw,
)
from ._view import (
    FOLD_BUDGET,
    LOOKAROUND,
    SCAN_BUDGET,
    Filters,
    Row,
    decode_rows,
    expandable,
    own_changes,
    page_words,
    pair,
    pretty_json,
)

__all__ = ["WebConfig", "create_app"]

_HERE = Path(__file__).parent
AUTO_VERIFY_LIMIT = 5_000
"""Sessions up to this many events are verified on every view; longer ones on request."""
EXPORT_CHUNK = 1 << 20
"""Bytes of the export sent per chunk of the download."""
_FORM_KINDS = ("long_running", "in_doubt", "idempotency_unknown")
"""Pending kinds the page answers with a result form (a confirmation gets buttons)."""
_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self'; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def create_app(config: WebConfig) -> Starlette:
    """Build the app for ``config``; the store is opened at startup and closed at shutdown."""
    env = Environment(loader=FileSystemLoader(_HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["json"] = pretty_json
    env.filters["short"] = lambda v, n=120: short_json(v, limit=n)
    env.filters["expandable"] = lambda v, n=120: expandable(v, limit=n)
    env.filters["page_words"] = page_words
    env.filters["command_words"] = command_words
    env.filters["stamp"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    env.filters["clean"] = clean
    env.filters["q"] = quote_id
    env.filters["at"] = address_query
    holder: dict[str, EventStore] = {}
    access = Access(token=config.token)
    policy = HostPolicy.for_server(config.host, allowed=config.allowed_hosts)
    can_write, why_not = writable(config.db)
    writes = config.allow_writes and can_write
    writes_note = ("" if writes else
                   f"Writes are disabled: {why_not}." if config.allow_writes else
                   "Read-only: start evs web with --allow-writes to answer or fork.")
    sign_in_note = ("Not signed in: to answer or fork, open the URL evs web printed in its "
                    "terminal (it carries the token once).")

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
        links = [(app_name, user_id, page_url(request.url.path, {
            **dict(request.query_params), "app": app_name, "user": user_id}))
            for app_name, user_id in exc.choices]
        return page(request, "choose.html", status=300, sid=exc.session_id, links=links)

    def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        # Forms only for a browser holding the session cookie: they carry its CSRF value,
        # never the token.
        cookie = access.session(request)
        forms = writes and cookie is not None
        html = env.get_template(template).render(
            request=request, writes=forms, writes_note=sign_in_note if writes and not forms
            else writes_note, csrf=access.csrf(cookie), db=config.db, **values)
        return HTMLResponse(html, status_code=status,
                            headers={**_SECURITY_HEADERS, "Cache-Control": "no-store"})

    def gate(request: Request) -> Response | None:
        """The answer to a request before its page: the sign-in redirect of ``?token=``, or
        the refusal of a remote server's read without the cookie (plain text: it names
        nothing of the store)."""
        signing_in = access.sign_in(request)
        if signing_in is not None:
            return signing_in
        if config.remote and not access.signed_in(request):
            return PlainTextResponse(
                "Refused: this evs web serves other machines, so every page needs the token: "
                "open the URL it printed in its terminal (it carries the token once).\n",
                status_code=403, headers=_SECURITY_HEADERS)
        return None

    def failure(request: Request, status: int, message: str) -> HTMLResponse:
        return page(request, "error.html", status=status, message=message)

    def guarded(handler: Callable[[Request], Awaitable[Response]]
                ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            stopped = gate(request)
            if stopped is not None:
                return stopped
            try:
                return await handler(request)
            except Refused as exc:
                return failure(request, exc.status, str(exc))
            except AmbiguousSessionError as exc:
                return choices(request, exc)
            except SessionNotFoundError as exc:
                return failure(request, 404, str(exc))
            except (EventStoreError, CliError) as exc:
                return failure(request, 400, str(exc))
        return run

    async def check_post(request: Request) -> dict[str, str]:
        """Refuse a POST without writes, from another origin, or without the session cookie
        and its CSRF value (or the token in ``X-EVS-Token``). The Host (and any Origin) was
        already found to be one the server was started for (``HostCheck``)."""
        if not writes:
            raise Refused(403, writes_note)
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin is not None and origin.partition("://")[2].lower() != host.lower():
            raise Refused(403, f"Refused a request from another origin ({origin}).")
        if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
            raise Refused(403, "Refused a cross-site request.")
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        if access.token_ok(request.headers.get(TOKEN_HEADER)):
            return form
        if access.session(request) is None:
            raise Refused(403, "Refused: this browser is not signed in to evs web (no valid "
                                "session cookie): open the URL it printed in its terminal "
                                "(it carries the token once), then answer from the page.")
        if not access.csrf_ok(request, form.get("csrf")):
            raise Refused(403, "Refused: the form's CSRF value is missing or wrong (reload "
                                "the page and try again).")
        return form

    async def sessions(request: Request) -> Response:
        q = request.query_params
        app_name, user, text = q.get("app", ""), q.get("user", ""), q.get("q", "")
        since = to_number(q.get("since"), "since")
        after = q.get("after") or None
        limit = page_size(q.get("limit"))
        try:
            listing = await store().list_sessions_newest(
                app_name=app_name or None, user_id=user or None, id_contains=text or None,
                updated_since=since, after=after, limit=limit)
        except StoreUsageError as exc:
            raise Refused(400, f"This is not a page of the sessions list: {exc}") from exc
        base = {"app": app_name, "user": user, "q": text, "since": q.get("since", ""),
                "limit": str(limit)}
        return page(request, "sessions.html", sessions=listing.sessions, filters=base,
                    first_page=after is None,
                    next_url=page_url("/", base, after=listing.next_cursor)
                    if listing.next_cursor is not None else None,
                    newest_url=page_url("/", base) if after is not None else None)

    async def session(request: Request) -> Response:
        sid = request.path_params["sid"]
        q = request.query_params
        info, key = await lookup(request, sid)
        where = address(info)
        filters = Filters(kind=q.get("kind", ""), author=q.get("author", ""),
                          tool=q.get("tool", ""), errors=q.get("errors") == "1",
                          text=q.get("q", ""))
        limit = page_size(q.get("limit"))
        raw_after = q.get("after")
        after = int(to_number(raw_after, "after") or 0) if raw_after else None
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
            next_url=page_url(f"/s/{quote_id(sid)}", base, after=scanned_to) if more else None,
            prev_url=page_url(f"/s/{quote_id(sid)}", base, after=prev_after)
            if prev_after is not None else None,
            first_url=page_url(f"/s/{quote_id(sid)}", base, **{"from": "start"}),
            verify_url=page_url(f"/s/{quote_id(sid)}", {**base, "verify": "1"},
                            after=after if raw_after else None),
            forks=forks, kinds=sorted(EventKind.ALL),
            live=not filters.active and scanned_to >= info.version,
            quoted=quote_id(sid), addr=address_query(info))

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
        seq = int(to_number(request.path_params["seq"], "seq") or 0)
        info, key = await lookup(request, sid)
        rows = await store().backend.read(key, after=seq - 1, upto=seq, backwards=False,
                                          limit=1)
        if not rows:
            raise Refused(404, f"Session {sid!r} has no event at seq {seq}.")
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
                    fold_budget=FOLD_BUDGET, quoted=quote_id(sid), addr=address_query(info))

    async def pending_view(request: Request) -> Response:
        from runtime.cli._pending import pending_payload

        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        # The runtime's own words: the page says "the buttons below" where a form answers
        # the item, and the evs command where none does (page_words / command_words).
        payload = await pending_payload(store(), sid, db=config.db, words=str,
                                        **where_kw(info))
        return page(request, "pending.html", info=info, payload=payload, quoted=quote_id(sid),
                    addr=address_query(info), message=request.query_params.get("done", ""),
                    form_kinds=_FORM_KINDS)

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
                raise Refused(400, f"The result is not valid JSON: {exc}.") from exc
            if not isinstance(value, dict):
                raise Refused(400, 'The result must be a JSON object; wrap a plain value as '
                                    '{"result": ...}.')
            event = await _answer(config.db, sid, call_id, command="respond",
                                  app_name=app_name, user_id=user_id,
                                  work=lambda s, app, user: submit_response(
                                      s, session_id=sid, call_id=call_id, response=value,
                                      app_name=app, user_id=user))
            done = f"Result of call {call_id} recorded (seq {event.seq})."
        else:
            raise Refused(400, f"Unknown action {action!r}: approve, reject or respond.")
        where = {"app": app_name or "", "user": user_id or ""}
        return RedirectResponse(page_url(f"/pending/{quote_id(sid)}", {**where, "done": done}),
                                status_code=303)

    async def fork(request: Request) -> Response:
        sid = request.path_params["sid"]
        form = await check_post(request)
        at = int(to_number(form.get("at"), "at") or 0)
        new_id = form.get("new_id") or None
        async with await open_existing(config.db, read_only=False) as writer:
            made = await writer.fork(sid, at=at, new_session_id=new_id,
                                     app_name=request.query_params.get("app") or None,
                                     user_id=request.query_params.get("user") or None)
        return RedirectResponse(page_url(f"/s/{quote_id(made.id)}", address(made)), status_code=303)

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
            number = to_number(request.query_params.get("version"), "version")
            try:
                chosen = await store().load_artifact(
                    sid, name, version=None if number is None else int(number),
                    **where_kw(info))
            except ArtifactNotFoundError as exc:
                raise Refused(404, str(exc)) from exc
        text = None
        if chosen is not None and not chosen.mime_type.startswith("image/"):
            text = chosen.data.decode("utf-8", "replace")
        return page(request, "artifacts.html", info=info, versions=versions, chosen=chosen,
                    text=text, image=chosen is not None and chosen.mime_type in _IMAGE_TYPES,
                    quoted=quote_id(sid), q=quote_id, addr=address_query(info))

    async def artifact_raw(request: Request) -> Response:
        sid = request.path_params["sid"]
        info, _ = await lookup(request, sid)
        number = to_number(request.query_params.get("version"), "version")
        found = await store().load_artifact(sid, request.query_params.get("name", ""),
                                            version=None if number is None else int(number),
                                            **where_kw(info))
        kind = found.mime_type if found.mime_type in _IMAGE_TYPES else "application/octet-stream"
        return Response(found.data, media_type=kind,
                        headers={**_SECURITY_HEADERS, "Content-Disposition": "inline"
                                 if kind in _IMAGE_TYPES else "attachment"})

    async def export(request: Request) -> Response:
        """The file ``evs export`` writes (``write_export``), built in a temporary file and
        streamed from it in chunks: memory stays flat however long the session."""
        sid = request.path_params["sid"]
        _, key = await lookup(request, sid)
        record = await store().backend.get_session(key)
        if record is None:
            raise SessionNotFoundError(sid)
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the stream's end
        try:
            await write_export(store().backend, record, spool)
            size = spool.tell()
            spool.seek(0)
        except BaseException:
            spool.close()
            raise

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await asyncio.to_thread(spool.read, EXPORT_CHUNK):
                    yield chunk
            finally:
                spool.close()

        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in sid)[:80] or "session"
        return StreamingResponse(chunks(), media_type="application/x-ndjson", headers={
            "Content-Disposition": f'attachment; filename="{name}.jsonl"',
            "Content-Length": str(size), **_SECURITY_HEADERS})

    async def live(request: Request) -> Response:
        sid = request.path_params["sid"]
        after = int(to_number(request.query_params.get("after"), "after") or 0)
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
                    html = template.render(row=row, quoted=quote_id(sid), at_head=True,
                                           horizon=row.seq, addr=address_query(info))
                    data = "".join(f"data: {line}\n" for line in html.splitlines())
                    yield f"id: {row.seq}\nevent: row\n{data}\n".encode()
                if await request.is_disconnected():
                    return

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", **_SECURITY_HEADERS})

    async def not_found(request: Request, exc: Exception) -> Response:
        return gate(request) or failure(request, 404, "No such page.")

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
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found},
                     middleware=[Middleware(HostCheck, policy=policy)])
