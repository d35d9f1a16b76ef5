"""The store façade's fork methods: a new session made of another's log up to a seq.

The rules (what a fork copies, where one may start, what it shares) are in ``eventstore._fork``
and on ``ForkMethods.fork``; the copy itself is one backend transaction. Knows no SQL.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from eventstore._args import check_int, check_str
from eventstore._exceptions import ForkPointError, SessionExistsError
from eventstore._fork import ForkLink, ForkPlan, SessionForks, StepScan, artifact_versions
from eventstore._session import Session
from eventstore._statefold import decode_all, in_seq_order
from eventstore.backends.protocol import Backend, SessionRecord

from .addressing import StoreBase

__all__ = ["ForkMethods"]

_PAGE = 512
"""Events read per page while looking for the next seq a refused fork may start at."""


def _where(open_calls: list[tuple[str, str, int | None]]) -> str:
    call_id, name, seq = open_calls[0]
    more = f" (and {len(open_calls) - 1} more)" if len(open_calls) > 1 else ""
    return f"call {call_id!r} of tool {name!r} (seq {seq}) has no settled response{more}"


def _nearest(before: int | None, after: int | None) -> str:
    named = [f"{before} (before)" if before is not None else "",
             f"{after} (after)" if after is not None else ""]
    shown = " or ".join(n for n in named if n)
    return f"the nearest seqs it may be forked at are {shown}" if shown else (
        "no seq of it is at a step boundary yet"
    )


class ForkMethods(StoreBase):
    """Mixed into EventStore: forking sessions and reading fork links."""

    async def fork(
        self,
        session_id: str,
        *,
        at: int,
        new_session_id: str | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> Session:
        """Create a new session whose log is session ``session_id``'s events ``1..at`` and
        return it (its state at head, its events).

        The fork has the origin's app and user, a generated id unless ``new_session_id`` is
        given (as ``create_session``), and a recorded link to the origin (``fork_links``). Its
        events are copies of the origin's stored rows — the same ids, seqs, authors, kinds,
        timestamps and payload bytes — and its session-scoped artifacts are the origin's
        versions up to the newest one those events refer to (``eventstore._fork``). Its state
        at every copied seq ``k < at`` is the origin's state at ``k``; at head its
        session-scoped state is the origin's at ``at``.

        ``user:``/``app:`` state is shared, as for any session of the app: the copies of
        events that changed it do not change it again (only the origin's rows take part in
        the shared fold, so other sessions see no change, and deleting the origin removes
        those deltas from the fold as for any deleted session); the fork's own later events
        change it as any session's do, and its state at head holds the shared state at head.

        A fork starts only at a step boundary (``eventstore._fork.StepScan``): between a tool
        call and its settled response it is refused with ForkPointError naming the nearest
        seqs before and after where it may start. Everything is written in one transaction:
        a fork killed half way leaves nothing. The origin is never changed.

        Raises SessionNotFoundError (no such origin), AmbiguousSessionError (the origin's id
        is held by several (app, user) and ``app_name``/``user_id`` do not pick one),
        ForkPointError (``at`` is not in ``1..head`` or is inside a step), SessionExistsError
        (the origin's user has a session ``new_session_id``), StoreUsageError (bad
        arguments); nothing is written when anything is raised.
        """
        backend = self._writable_backend()
        at = check_int(at, "at", minimum=-(1 << 63), maximum=1 << 63)
        if new_session_id is not None:
            check_str(new_session_id, "new_session_id")
        origin = await self._record(session_id, app_name=app_name, user_id=user_id)
        app, user, origin_key = origin.app_name, origin.user_id, origin.session_id
        head = origin.version
        if not 1 <= at <= head:
            span = f"has events 1..{head}" if head else "has no events"
            raise ForkPointError(
                f"Session {session_id!r} {span}; it cannot be forked at seq {at} (a fork "
                "starts after one of the session's events).",
                session_id=session_id, seq=at, reason="out_of_range",
            )
        new_id = new_session_id if new_session_id is not None else uuid.uuid4().hex
        if await backend.find_sessions(new_id, app_name=app, user_id=user):
            raise SessionExistsError(new_id)
        rows = await backend.read(origin_key, after=None, upto=at, backwards=False, limit=None)
        events = decode_all(in_seq_order(origin_key, rows, upto=at))
        scan, before = StepScan(), None
        for event in events[:-1]:
            scan.feed(event)
            if scan.at_rest():
                before = event.seq
        scan.feed(events[-1])
        open_calls = scan.open_calls()
        if open_calls:
            after = await self._next_rest(backend, origin_key, scan, at)
            raise ForkPointError(
                f"Session {session_id!r} cannot be forked at seq {at}: it is inside a step "
                f"({_where(open_calls)}); {_nearest(before, after)}.",
                session_id=session_id, seq=at, reason="inside_step", before=before, after=after,
            )
        now = time.time()
        await backend.fork_session(
            SessionRecord(session_id=new_id, given_id=new_id, app_name=app, user_id=user,
                          created_at=now),
            ForkPlan(origin_session_id=origin_key, seq=at, artifacts=artifact_versions(events),
                     forked_at=now),
        )
        record = await self._record(new_id, app_name=app, user_id=user)
        return Session(
            id=new_id,
            app_name=record.app_name,
            user_id=record.user_id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            version=record.version,
            state=await self._folder.state(record, at=record.version),
            events=events,
        )

    @staticmethod
    async def _next_rest(backend: Backend, key: str, scan: StepScan,
                         at: int) -> int | None:
        """The first seq after ``at`` where the log is at rest (``scan`` has fed 1..at)."""
        cursor = at
        while True:
            rows = await backend.read(key, after=cursor, upto=None, backwards=False,
                                      limit=_PAGE)
            for event in decode_all(in_seq_order(key, rows, after=cursor)):
                scan.feed(event)
                if scan.at_rest():
                    return event.seq
            if len(rows) < _PAGE:
                return None
            cursor = rows[-1].seq

    async def fork_links(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionForks:
        """Return where the session was forked from (if it is a fork; ``origin_exists`` says
        whether that session still exists) and the forks made of it, oldest first, each link
        naming both sessions by the ids their app gave them, with their app and user.

        Raises SessionNotFoundError when the session does not exist, AmbiguousSessionError as
        ``fork`` does.
        """
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        backend = self._open_backend()
        key = record.session_id
        links: list[ForkLink] = await backend.fork_links(key)
        given: dict[str, str | None] = {key: record.id}

        async def given_id(of: str) -> str | None:
            if of not in given:
                found = await backend.get_session(of)
                given[of] = None if found is None else found.id
            return given[of]

        named = []
        for link in links:
            fork_id = await given_id(link.session_id)
            origin_id = await given_id(link.origin_session_id)
            named.append((link, dataclasses.replace(
                link, session_id=fork_id or link.session_id,
                origin_session_id=origin_id or link.origin_session_id,
                app_name=record.app_name, user_id=record.user_id)))
        origin = next((n for link, n in named if link.session_id == key), None)
        return SessionForks(
            origin=origin,
            origin_exists=origin is not None and given[
                next(link for link, _ in named if link.session_id == key).origin_session_id
            ] is not None,
            forks=[n for link, n in named if link.origin_session_id == key],
        )
