"""``check_chain`` names the damage, whatever order the damaged rows are stored in: a hand edit
of the ``seq`` column leaves the hidden ``row_key`` (the order reads return rows in) as it was,
so the classifier must look at the whole log, not only at the first row out of place.

Pure properties over rows built in memory; the same damage done with raw SQL on real SQLite
and PostgreSQL databases is in ``test_tamper_evidence.py``."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from eventstore._chain import GENESIS, chain_hashes
from eventstore._chain_check import check_chain
from eventstore.backends.protocol import StoredEvent


def _log(count: int) -> list[StoredEvent]:
    rows = [StoredEvent(session_id="s", seq=n, position=n, event_id=f"e{n}", kind="message",
                        invocation_id="i", author="user", timestamp=1000.0 + n,
                        shared_state=False, schema_version=2, payload=b'{"t":"msg %d"}' % n)
            for n in range(1, count + 1)]
    hashes = chain_hashes(GENESIS, 1, rows)
    return [dataclasses.replace(r, chain_hash=h) for r, h in zip(rows, hashes, strict=True)]


def _renumbered(row: StoredEvent, seq: int) -> StoredEvent:
    return dataclasses.replace(row, seq=seq)


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[int, int, int]:
    count = draw(st.integers(2, 9))
    first = draw(st.integers(1, count - 1))
    return count, first, draw(st.integers(first + 1, count))


@given(pair=_pairs(), shuffle=st.randoms(use_true_random=False), in_row_key_order=st.booleans())
def test_check_chain_swapped_seqs_are_reordered_not_deleted(
    pair: tuple[int, int, int], shuffle: object, in_row_key_order: bool
) -> None:
    count, a, b = pair
    rows = _log(count)
    # The seq columns of two rows traded; the rows stay where they were stored.
    rows[a - 1], rows[b - 1] = _renumbered(rows[a - 1], b), _renumbered(rows[b - 1], a)
    if not in_row_key_order:
        shuffle.shuffle(rows)  # type: ignore[attr-defined]
    problem = check_chain(rows)
    assert problem is not None
    assert (problem.seq, problem.code) == (a, "chain_reordered"), problem
    assert f"seq {a} and seq {b} traded places" in problem.message


@given(count=st.integers(1, 9), data=st.data(), with_hash=st.booleans())
def test_check_chain_copy_inserted_in_the_middle_is_inserted(
    count: int, data: st.DataObject, with_hash: bool
) -> None:
    rows = _log(count)
    at = data.draw(st.integers(1, count), label="at")
    source = rows[data.draw(st.integers(0, count - 1), label="source")]
    copy = dataclasses.replace(source, seq=at, event_id="copied",
                               chain_hash=source.chain_hash if with_hash else None)
    # The later rows' seq columns move up one; the copy is stored last (the next row_key).
    damaged = [r if r.seq < at else _renumbered(r, r.seq + 1) for r in rows] + [copy]
    problem = check_chain(damaged)
    assert problem is not None
    assert (problem.seq, problem.code) == (at, "chain_inserted"), problem


@given(count=st.integers(2, 9), data=st.data())
def test_check_chain_two_rows_at_one_seq_is_inserted(count: int, data: st.DataObject) -> None:
    rows = _log(count)
    at = data.draw(st.integers(1, count), label="at")
    copy = dataclasses.replace(rows[at - 1], event_id="copied")
    problem = check_chain([*rows, copy])
    assert problem is not None
    assert (problem.seq, problem.code) == (at, "chain_inserted"), problem


@given(count=st.integers(2, 9), data=st.data())
def test_check_chain_missing_seq_is_deleted(count: int, data: st.DataObject) -> None:
    rows = _log(count)
    gone = data.draw(st.integers(1, count - 1), label="gone")
    problem = check_chain([r for r in rows if r.seq != gone])
    assert problem is not None
    assert (problem.seq, problem.code) == (gone, "chain_deleted"), problem


def test_check_chain_untouched_log_in_any_stored_order_checks_out() -> None:
    rows = _log(6)
    assert check_chain(rows) is None
    assert check_chain(list(reversed(rows))) is None
