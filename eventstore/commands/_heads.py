"""Heads the application saw, checked against the database: ``evs heads`` and
``evs verify --expect-heads FILE``.

A store cannot tell by itself that its history was cut short: after a failover to an
asynchronous standby that had not yet replayed the newest commits, the new primary's log is
complete and its chains verify, only shorter. What tells is a record kept *outside* that
database of heads that were once acknowledged: for each session, a ``seq`` and the id of the
event stored there (and, from ``evs heads``, its chain hash). The application can keep it
from what ``append`` returns (each returned event has its ``seq`` and ``id``), or run
``evs heads --output FILE`` on a schedule and keep the file elsewhere. ``evs verify
--expect-heads FILE`` then reports each session whose head moved back (``head_moved_back``):
its log ends before the recorded ``seq``, holds another event there, or the session is gone.

The file is JSON Lines, one head per line:
``{"session_id": "s1", "seq": 42, "event_id": "e42", "chain_hash": "…hex…"}`` (``app_name``
and ``user_id`` when several apps or users hold the id; ``event_id`` and ``chain_hash``
optional). Several lines of one session: the highest ``seq`` counts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from eventstore.store.facade import EventStore

from .._exceptions import SessionNotFoundError
from ._common import DEFAULT_DB, CliError, DbOption, open_existing, run
from ._verify import Finding

__all__ = [
    "HEAD_MOVED_BACK", "ExpectedHead", "check_heads", "export_heads", "heads", "parse_heads",
    "read_heads",
]

HEAD_MOVED_BACK = "head_moved_back"
"""The finding's code: a head the application saw is not in the log."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedHead:
    """One acknowledged head the log must still hold."""

    session_id: str
    """The session's id."""
    seq: int
    """The seq of the newest event the application saw acknowledged."""
    event_id: str | None = None
    """The id of the event at ``seq`` (None: not checked)."""
    chain_hash: str | None = None
    """The chain hash of the event at ``seq``, hex (None: not checked)."""
    app_name: str | None = None
    """The session's app, when the id alone is ambiguous."""
    user_id: str | None = None
    """The session's user, when the id alone is ambiguous."""


def parse_heads(lines: Iterable[bytes | str], *, source: str) -> list[ExpectedHead]:
    """The heads of a JSON Lines file (blank lines skipped; per session the highest ``seq``).
    Raises CliError naming the line that is not a head."""
    newest: dict[tuple[str, str | None, str | None], ExpectedHead] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
            head = ExpectedHead(**{k: value[k] for k in (
                "session_id", "seq", "event_id", "chain_hash", "app_name", "user_id")
                if value.get(k) is not None})
            if not isinstance(head.session_id, str) or not isinstance(head.seq, int) \
                    or head.seq < 0:
                raise TypeError("session_id must be a string and seq a non-negative integer")
        except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise CliError(f"Line {number} of {source} is not a head record "
                           f'({{"session_id": …, "seq": …}}): {exc}.') from exc
        key = (head.session_id, head.app_name, head.user_id)
        if key not in newest or newest[key].seq < head.seq:
            newest[key] = head
    return list(newest.values())


async def export_heads(store: EventStore) -> list[dict[str, Any]]:
    """Every session's head as ``evs heads`` prints it (one mapping per session, by id)."""
    heads: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = await store.list_sessions(after=after, limit=500)
        for info in page.sessions:
            key = await store.session_key(info.id, app_name=info.app_name,
                                          user_id=info.user_id)
            rows = await store.backend.read(key, after=None, upto=None, backwards=True,
                                            limit=1)
            heads.append({
                "session_id": info.id, "app_name": info.app_name, "user_id": info.user_id,
                "seq": rows[0].seq if rows else 0,
                "event_id": rows[0].event_id if rows else None,
                "chain_hash": rows[0].chain_hash.hex() if rows and rows[0].chain_hash
                else None,
            })
        if page.next_cursor is None:
            return heads
        after = page.next_cursor


async def check_heads(store: EventStore, expected: Iterable[ExpectedHead]) -> list[Finding]:
    """A ``head_moved_back`` finding for each expected head the log does not hold."""
    findings: list[Finding] = []
    for head in expected:
        def moved(why: str, head: ExpectedHead = head) -> None:
            findings.append(Finding(
                session_id=head.session_id, seq=head.seq, code=HEAD_MOVED_BACK,
                message=f"The head the application saw (seq {head.seq}"
                f"{f', event {head.event_id!r}' if head.event_id else ''}) is not in the "
                f"log: {why}. Events acknowledged before were lost (a failover to a standby "
                "that had not replayed them, or a restore from an older backup)."))
        try:
            key = await store.session_key(head.session_id, app_name=head.app_name,
                                          user_id=head.user_id)
        except SessionNotFoundError:
            moved("the session does not exist")
            continue
        if head.seq == 0:
            continue
        rows = await store.backend.read(key, after=head.seq - 1, upto=head.seq,
                                        backwards=False, limit=1)
        if not rows:
            version = await store.version(head.session_id, app_name=head.app_name,
                                          user_id=head.user_id)
            moved(f"the log ends at seq {version}")
        elif head.event_id is not None and rows[0].event_id != head.event_id:
            moved(f"seq {head.seq} holds event {rows[0].event_id!r}")
        elif head.chain_hash is not None and (
            rows[0].chain_hash is None or rows[0].chain_hash.hex() != head.chain_hash.lower()
        ):
            moved(f"the event at seq {head.seq} has another chain hash")
    return findings


def heads(
    db: DbOption = DEFAULT_DB,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print every session's head (seq, event id, chain hash) as JSON Lines: keep the file
    outside the database, and after a failover or a restore run evs verify --expect-heads FILE
    on the new database to find the sessions whose history was cut short."""

    async def main() -> list[dict[str, Any]]:
        async with await open_existing(db, read_only=True) as store:
            return await export_heads(store)

    lines = b"".join(orjson.dumps(head) + b"\n" for head in run(main()))
    if output is None:
        sys.stdout.buffer.write(lines)
        sys.stdout.flush()
    else:
        output.write_bytes(lines)


def read_heads(path: Path) -> list[ExpectedHead]:
    """The heads of the file ``--expect-heads`` names; CliError when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"Cannot read the heads file {path}: {exc.strerror or exc}.") from exc
    return parse_heads(data.splitlines(), source=str(path))
