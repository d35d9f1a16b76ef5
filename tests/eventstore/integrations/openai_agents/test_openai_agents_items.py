"""``plain_item``'s quick check of plain JSON items gives what its full walk gives: the same
stored mapping, or the same refusal."""

from __future__ import annotations

from _extras import require_extra

agents = require_extra("agents", "openai-agents")

import enum  # noqa: E402
from collections import OrderedDict  # noqa: E402
from typing import Any  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eventstore.integrations.openai_agents import SessionItemError  # noqa: E402
from eventstore.integrations.openai_agents.items import _json_value, plain_item  # noqa: E402


class _Name(enum.StrEnum):
    A = "a"


_ODD = (float("nan"), float("inf"), -float("inf"), _Name.A, b"x", (1, "two"), OrderedDict(a=1),
        {1: "key"}, 1.5)
"""What is not plain JSON as it is, but may be stored (a copy) or must be refused."""

_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
              st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=10)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "stored", call()
    except SessionItemError as exc:
        return "refused", (str(exc), exc.index, exc.path)


def _same_as_the_walk(item: dict[str, Any]) -> None:
    assert _outcome(lambda: plain_item(item, 2)) == _outcome(
        lambda: _json_value(dict(item), 2, "$"))


@given(item=st.dictionaries(st.text(max_size=3), _VALUES, max_size=4), odd=st.data())
def test_plain_item_stores_and_refuses_as_the_full_walk_does(item: dict[str, Any],
                                                              odd: st.DataObject) -> None:
    _same_as_the_walk(item)
    value = odd.draw(st.sampled_from(_ODD))
    _same_as_the_walk({**item, "odd": value})
    _same_as_the_walk({**item, "deep": [{"odd": value}]})
