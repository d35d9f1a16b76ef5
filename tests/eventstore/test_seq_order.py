"""``in_seq_order``: what the store's reads return is in seq order and inside the range asked
for, or the read fails naming the first row out of place (pure; the same on real databases
after raw-SQL edits is in ``test_tamper_evidence.py``)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from eventstore import CorruptEventError
from eventstore._statefold import in_seq_order
from eventstore.backends.protocol import EventRow


def _rows(seqs: list[int]) -> list[EventRow]:
    return [(seq, f"e{seq}", "i", "user", 1.0, 2, b"{}") for seq in seqs]


@given(seqs=st.lists(st.integers(1, 60), unique=True), backwards=st.booleans())
def test_in_seq_order_accepts_ordered_rows_gaps_and_all(seqs: list[int], backwards: bool) -> None:
    rows = _rows(sorted(seqs, reverse=backwards))
    assert in_seq_order("s", rows, backwards=backwards) is rows


_gap_free = st.integers(2, 12).flatmap(lambda n: st.just(list(range(5, 5 + n))))
"""A whole log's seqs (or a page of one): permuted, the ends may stay where they were."""


@given(seqs=st.lists(st.integers(1, 60), min_size=2) | _gap_free, backwards=st.booleans(),
       data=st.data())
def test_in_seq_order_refuses_the_first_row_out_of_order(
    seqs: list[int], backwards: bool, data: st.DataObject
) -> None:
    wanted = sorted(set(seqs), reverse=backwards)
    order = data.draw(st.permutations(seqs))
    assume(order != wanted)  # not a permutation that happens to be ordered and distinct
    ahead = (lambda a, b: a > b) if backwards else (lambda a, b: a < b)
    culprit = next(b for a, b in pairwise(order) if not ahead(a, b))
    with pytest.raises(CorruptEventError) as caught:
        in_seq_order("s", _rows(order), backwards=backwards)
    assert (caught.value.session_id, caught.value.seq) == ("s", culprit)
    assert "out of seq order" in caught.value.reason
    assert "evs verify s" in caught.value.reason


def test_in_seq_order_refuses_a_swap_inside_a_gap_free_page() -> None:
    with pytest.raises(CorruptEventError) as caught:
        in_seq_order("s", _rows([1, 2, 4, 3, 5, 6]))
    assert caught.value.seq == 3


@pytest.mark.parametrize(("seqs", "after", "upto", "culprit"), [
    pytest.param([3, 5, 6], 3, None, 3, id="at-the-after-bound"),
    pytest.param([2, 4, 9], None, 8, 9, id="past-upto"),
    pytest.param([0, 1, 2], None, None, 0, id="seq-zero"),
])
def test_in_seq_order_refuses_rows_outside_the_range_read(
    seqs: list[int], after: int | None, upto: int | None, culprit: int
) -> None:
    with pytest.raises(CorruptEventError) as caught:
        in_seq_order("s", _rows(seqs), after=after, upto=upto)
    assert caught.value.seq == culprit
