"""Checking a session's hash chain and signatures: pure functions of its stored rows and head.

``check_chain`` recomputes the chain (``eventstore._chain``) over the rows in ``seq`` order
(whatever order they are stored in: a hand edit of the ``seq`` column leaves the hidden
``row_key`` that orders reads as it was) and reports the FIRST place it breaks, with how
(stable codes). A break is classified by looking past it, at the rows after it:

- ``chain_edited``    the row's columns changed after it was written (the next row still links
                      to its stored hash, or the head record vouches for it);
- ``chain_inserted``  a row was put in that the store did not write (it has no hash, two rows
                      hold its ``seq``, the row written for its place comes later, the rows after
                      it link to the row before it, or it lies beyond the head record);
- ``chain_deleted``   a row is missing (a ``seq`` no row holds, or later rows renumbered down:
                      they link one ``seq`` further than they stand);
- ``chain_reordered`` two rows traded places (each links where the other stands);
- ``tail_removed``    every row checks out but the head record is ahead of the last one;
- ``head_mismatch``   the head record's hash (or, keyed, its signature) is not the last row's;
- ``chain_broken``    the row's hash is wrong in a way none of the above explains.

``signature_problems`` (keyed mode) names every row whose signature is ``unsigned`` (missing)
or a ``bad_signature``. A row a keyed store did not sign may be older than the key (written
before the store was keyed, or migrated from before revision 0008): stored rows are never
rewritten, so it stays ``unsigned`` (README, "Tamper evidence").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from ._chain import GENESIS, content_digest, link, sign_head, signature_ok
from .backends.protocol import SessionRecord, StoredEvent

__all__ = ["CHAIN_CODES", "ChainProblem", "HeadRecord", "Linked", "SignatureProblem",
           "check_chain", "signature_problems"]

CHAIN_CODES: Final = (
    "chain_edited", "chain_inserted", "chain_deleted", "chain_reordered", "tail_removed",
    "head_mismatch", "chain_broken",
)
"""Every code ``check_chain`` reports (stable strings)."""

SignatureProblem = Literal["unsigned", "bad_signature"]
"""Why a keyed store does not trust an event (stable strings)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainProblem:
    """Where a session's chain first breaks, and how."""

    seq: int
    """The first seq concerned."""
    code: str
    """One of ``CHAIN_CODES``."""
    message: str
    """What is wrong, in one sentence."""


def _seq(row: Linked) -> int:
    return row.seq


def _digest(row: Any) -> bytes | None:
    try:
        return content_digest(row)
    except (ValueError, TypeError, AttributeError):
        return None  # a column a hand edit filled with something else


Links = Callable[[bytes, int, Any, "bytes | None"], bool]
"""``links(prev, seq, row, want)``: whether ``row`` placed at ``seq`` after ``prev`` hashes to
``want``."""


def _linker(digest: Callable[[Any], bytes | None]) -> Links:
    def links(prev: bytes, seq: int, row: Any, want: bytes | None) -> bool:
        found = digest(row)
        return want is not None and found is not None and link(prev, seq, found) == want

    return links


class Linked(Protocol):
    """What the chain check reads of a row: its place and its stored hash."""

    @property
    def seq(self) -> int: ...
    @property
    def chain_hash(self) -> bytes | None: ...


class HeadRecord(Protocol):
    """What the chain check reads of a head record (a session's, or a stream's)."""

    @property
    def head_seq(self) -> int | None: ...
    @property
    def head_hash(self) -> bytes | None: ...


def _classify(rows: Sequence[Any], i: int, prev: bytes, before: bytes | None,
              head: HeadRecord | None, _links: Links) -> ChainProblem:
    """Say how the chain breaks at ``rows[i]`` (``prev``: the hash it should follow;
    ``before``: the hash ``prev``'s row followed, None at the first row)."""
    row = rows[i]
    k = row.seq
    nxt = rows[i + 1] if i + 1 < len(rows) else None

    def problem(code: str, message: str, seq: int = k) -> ChainProblem:
        return ChainProblem(seq=seq, code=code, message=message)

    if row.chain_hash is None:
        return problem("chain_inserted", f"seq {k} has no chain hash: the store did not write "
                       "it (inserted behind its back).")
    if before is not None and i >= 1 and _links(before, k - 1, row, row.chain_hash):
        return problem("chain_inserted", f"seq {k} links to seq {k - 2}: the event at seq "
                       f"{k - 1} was inserted behind the store's back.", seq=k - 1)
    if nxt is not None:
        if _links(nxt.chain_hash or b"", k + 1, row, row.chain_hash) and _links(
                prev, k, nxt, nxt.chain_hash):
            return problem("chain_reordered", f"seq {k} and seq {nxt.seq} traded places.")
        if _links(prev, k, nxt, row.chain_hash) and _links(row.chain_hash, k + 1, row,
                                                           nxt.chain_hash):
            return problem("chain_reordered", f"the contents of seq {k} and seq {nxt.seq} "
                           "traded places.")
        if _links(prev, k, nxt, nxt.chain_hash):
            return problem("chain_inserted", f"seq {nxt.seq} is what seq {k} was: the event "
                           f"now at seq {k} was inserted behind the store's back.")
        if _links(row.chain_hash, k + 1, nxt, nxt.chain_hash):
            return problem("chain_edited", f"seq {k} was changed after it was written (its "
                           "stored hash no longer matches its content; the chain links after "
                           "it).")
        if _links(row.chain_hash, k + 2, nxt, nxt.chain_hash):
            return problem("chain_deleted", f"the event at seq {k} was deleted and the later "
                           "events renumbered down.")
        # Past the neighbour: is the row written for seq k stored further on?
        for j in range(i + 2, len(rows)):
            owner = rows[j]
            if not _links(prev, k, owner, owner.chain_hash):
                continue
            if _links(rows[j - 1].chain_hash or b"", owner.seq, row, row.chain_hash):
                return problem("chain_reordered", f"seq {k} and seq {owner.seq} traded "
                               "places.")
            return problem("chain_inserted", f"seq {owner.seq} is what seq {k} was: the "
                           f"events now at seq {k}..{owner.seq - 1} were inserted behind the "
                           "store's back.")
    elif head is not None and head.head_seq is not None:
        if head.head_seq < k:
            return problem("chain_inserted", f"seq {k} lies beyond the session's head record "
                           f"(seq {head.head_seq}): it was appended behind the store's back.")
        if head.head_seq == k and head.head_hash == row.chain_hash:
            return problem("chain_edited", f"seq {k} was changed after it was written (its "
                           "stored hash no longer matches its content; the head record vouches "
                           "for the hash).")
    return problem("chain_broken", f"the chain breaks at seq {k}: its stored hash matches "
                   "neither its content nor its place.")


def check_chain(
    rows: Sequence[Linked], *, head: HeadRecord | None = None,
    signing_key: bytes | None = None,
    digest: Callable[[Any], bytes | None] = _digest, first_seq: int = 1, prev: bytes = GENESIS,
) -> ChainProblem | None:
    """Return where the chain of one session's ``rows`` (as stored, in any order: they are
    checked in ``seq`` order) first breaks, or None when it checks out. ``head`` (the
    session's record with its head fields) also catches a removed or replaced tail; with
    ``signing_key`` (and a SessionRecord ``head``) the head record's signature must check out
    too (a head moved back by someone without the key). ``digest`` gives a row's content
    digest (None for a row it cannot read): another chain of the same shape (a shared-state
    stream, ``eventstore._scopes``) is checked with its own.

    A part of the log is checked with ``first_seq`` (the seq it starts at) and ``prev`` (the
    stored chain hash of the row before it, taken on trust): then only its rows' links to
    that hash and to each other are checked, and the head record only when given (pass it
    when the rows end at the log's end; else pass the row after the part among ``rows``, so
    the last row is vouched for by its successor's link)."""
    _links = _linker(digest)
    rows = sorted(rows, key=_seq)
    before: bytes | None = None
    expected = first_seq
    for i, row in enumerate(rows):
        if row.seq < expected:  # only a seq below 1 sorts before the place it should hold
            return ChainProblem(seq=row.seq, code="chain_inserted",
                                message=f"seq {row.seq} is no place in a log (seqs start at "
                                "1): the row was inserted behind the store's back.")
        if row.seq != expected:
            missing = f"{expected}" if row.seq == expected + 1 else f"{expected}..{row.seq - 1}"
            return ChainProblem(seq=expected, code="chain_deleted",
                                message=f"seq {missing} was deleted (the chain skips from "
                                f"seq {expected - 1} to seq {row.seq}).")
        if i + 1 < len(rows) and rows[i + 1].seq == row.seq:
            return ChainProblem(seq=row.seq, code="chain_inserted",
                                message=f"seq {row.seq} is stored twice: a row was inserted "
                                "behind the store's back.")
        if not _links(prev, row.seq, row, row.chain_hash):
            return _classify(rows, i, prev, before, head, _links)
        assert row.chain_hash is not None
        before, prev, expected = prev, row.chain_hash, expected + 1
    last = expected - 1
    if head is None or head.head_seq is None:
        return None
    if head.head_seq > last:
        removed = f"{last + 1}" if head.head_seq == last + 1 else f"{last + 1}..{head.head_seq}"
        return ChainProblem(seq=last + 1, code="tail_removed",
                            message=f"the session's head record is at seq {head.head_seq} but "
                            f"its log ends at seq {last}: seq {removed} was removed.")
    if head.head_seq < last:
        return ChainProblem(seq=head.head_seq + 1, code="chain_inserted",
                            message=f"the events after seq {head.head_seq} (the session's head "
                            "record) were appended behind the store's back.")
    if last and head.head_hash != prev:
        return ChainProblem(seq=last, code="head_mismatch",
                            message=f"the session's head record does not hold the hash of seq "
                            f"{last}.")
    if signing_key is not None and last and isinstance(head, SessionRecord) and (
            head.head_signature is None
            or head.head_signature != sign_head(signing_key, head.session_id, last, prev)):
        return ChainProblem(seq=last, code="head_mismatch",
                            message="the session's head record is not signed by this key: it "
                            "was written behind the store's back, or before the store was "
                            "keyed.")
    return None


def signature_problems(
    session_id: str, rows: Sequence[StoredEvent], signing_key: bytes
) -> dict[int, SignatureProblem]:
    """Return ``seq -> problem`` for every row whose signature under ``signing_key`` is missing
    (``unsigned``) or wrong (``bad_signature``)."""
    found: dict[int, SignatureProblem] = {}
    for row in rows:
        if row.signature is None:
            found[row.seq] = "unsigned"
        elif not signature_ok(signing_key, session_id, row.chain_hash, row.signature):
            found[row.seq] = "bad_signature"
    return found
