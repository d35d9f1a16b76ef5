"""The state fold: one rule, and the algebra that makes snapshots safe."""

from __future__ import annotations

from typing import Any

import pytest
from _evs_support import json_values
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import apply_delta, fold_state
from eventstore._state import has_shared_keys, session_part, shared_part, strip_temp

keys = st.sampled_from(["a", "b", "c", "n", "user:u", "app:x", "temp:t"])
deltas = st.dictionaries(keys, st.none() | json_values, max_size=4)
delta_lists = st.lists(deltas, max_size=12)
states = st.dictionaries(keys, json_values, max_size=4)
FOLD_SETTINGS = settings(max_examples=60, deadline=None)


def _reference(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """The fold rule spelled out once more: None deletes, anything else replaces whole."""
    state: dict[str, Any] = {}
    for delta in deltas:
        for key, value in delta.items():
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
    return state


@FOLD_SETTINGS
@given(delta_lists)
def test_fold_state_follows_the_rule(deltas: list[dict[str, Any]]) -> None:
    assert fold_state(deltas) == _reference(deltas)


@FOLD_SETTINGS
@given(delta_lists, st.data())
def test_fold_state_snapshot_plus_tail_equals_full_fold(
    deltas: list[dict[str, Any]], data: st.DataObject
) -> None:
    split = data.draw(st.integers(0, len(deltas)), label="split")
    snapshot = fold_state(deltas[:split])
    assert fold_state(deltas[split:], initial=snapshot) == fold_state(deltas)


@FOLD_SETTINGS
@given(states, delta_lists, delta_lists, delta_lists)
def test_fold_state_is_associative_over_concatenation(
    initial: dict[str, Any], a: list[dict[str, Any]], b: list[dict[str, Any]],
    c: list[dict[str, Any]]
) -> None:
    whole = fold_state(a + b + c, initial=initial)
    assert fold_state(c, initial=fold_state(a + b, initial=initial)) == whole
    assert fold_state(b + c, initial=fold_state(a, initial=initial)) == whole
    # Composing deltas first (later keys win, None included) gives the same state too.
    composed: dict[str, Any] = {}
    for delta in a + b + c:
        composed.update(delta)
    assert fold_state([composed], initial=initial) == whole


@FOLD_SETTINGS
@given(states, delta_lists)
def test_fold_state_never_mutates_its_inputs(
    initial: dict[str, Any], deltas: list[dict[str, Any]]
) -> None:
    initial_copy = dict(initial)
    deltas_copy = [dict(d) for d in deltas]
    fold_state(deltas, initial=initial)
    assert initial == initial_copy
    assert deltas == deltas_copy


@pytest.mark.parametrize(
    ("state", "delta", "expected"),
    [
        pytest.param({"a": 1}, {"a": None}, {}, id="none-deletes"),
        pytest.param({}, {"a": None}, {}, id="deleting-missing-key-is-harmless"),
        pytest.param({"n": {"x": 1, "y": 2}}, {"n": {"z": 3}}, {"n": {"z": 3}},
                     id="nested-mapping-replaced-whole"),
        pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="list-replaced-whole"),
        pytest.param({"a": 1}, {"a": False}, {"a": False}, id="false-is-a-value"),
        pytest.param({"a": 1}, {"a": 0}, {"a": 0}, id="zero-is-a-value"),
        pytest.param({"a": 1}, {"a": {}}, {"a": {}}, id="empty-mapping-is-a-value"),
        pytest.param({"a": 1}, {}, {"a": 1}, id="empty-delta"),
    ],
)
def test_apply_delta_cases(state: dict[str, Any], delta: dict[str, Any],
                           expected: dict[str, Any]) -> None:
    apply_delta(state, delta)
    assert state == expected


@FOLD_SETTINGS
@given(deltas)
def test_scopes_partition_a_delta(delta: dict[str, Any]) -> None:
    kept = strip_temp(delta)
    assert not any(k.startswith("temp:") for k in kept)
    assert {k: v for k, v in delta.items() if not k.startswith("temp:")} == kept
    session = session_part(kept)
    user = shared_part(kept, user=True)
    app = shared_part(kept, user=False)
    assert all(k.startswith("user:") for k in user)
    assert all(k.startswith("app:") for k in app)
    assert not set(session) & (set(user) | set(app))
    assert {**session, **user, **app} == kept
    assert has_shared_keys(kept) == bool(user or app)
