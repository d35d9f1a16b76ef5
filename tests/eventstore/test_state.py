"""The state fold: one rule, and the algebra that makes snapshots safe."""

from __future__ import annotations

from typing import Any

import pytest
from _evs_support import json_values
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import EventActions, apply_delta, fold_state
from eventstore._state import (
    apply_actions,
    has_shared_keys,
    session_part,
    shared_part,
    strip_temp,
    touches_shared_keys,
)

keys = st.sampled_from(["a", "b", "c", "n", "user:u", "app:x", "temp:t"])
deltas = st.dictionaries(keys, st.none() | json_values, max_size=4)
delta_lists = st.lists(deltas, max_size=12)
states = st.dictionaries(keys, json_values, max_size=4)
FOLD_SETTINGS = settings(max_examples=60, deadline=None)


def _reference(deltas: list[dict[str, Any]],
               deletions: list[list[str]] | None = None) -> dict[str, Any]:
    """The fold rule spelled out once more: every value, None too, replaces whole; then the
    event's deletions remove their keys."""
    state: dict[str, Any] = {}
    for i, delta in enumerate(deltas):
        for key, value in delta.items():
            state[key] = value
        for key in (deletions[i] if deletions else ()):
            state.pop(key, None)
    return state


@st.composite
def actions_lists(draw: st.DrawFn) -> list[EventActions]:
    """Events' actions: a delta and deletions of other keys (an event does one or the other
    for a key)."""
    out = []
    for delta in draw(delta_lists):
        free = [k for k in ["a", "b", "c", "n", "user:u", "app:x"] if k not in delta]
        gone = draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if free else []
        out.append(EventActions(state_delta=delta, state_deletions=tuple(gone)))
    return out


@FOLD_SETTINGS
@given(delta_lists)
def test_fold_state_follows_the_rule(deltas: list[dict[str, Any]]) -> None:
    assert fold_state(deltas) == _reference(deltas)


@FOLD_SETTINGS
@given(actions_lists(), st.data())
def test_apply_actions_follows_the_rule_in_each_scope(
    actions: list[EventActions], data: st.DataObject
) -> None:
    """None stays a value, deletions remove; a snapshot at any split plus the tail equals the
    full fold (what the snapshots rely on)."""
    for scope, part in (("session", session_part),
                        ("user", lambda d: shared_part(d, user=True)),
                        ("app", lambda d: shared_part(d, user=False))):
        full: dict[str, Any] = {}
        for a in actions:
            apply_actions(full, a, scope=scope)  # type: ignore[arg-type]
        expected = _reference([part(a.state_delta) for a in actions],
                              [list(part(dict.fromkeys(a.state_deletions))) for a in actions])
        assert full == expected
        split = data.draw(st.integers(0, len(actions)), label="split")
        snapshot: dict[str, Any] = {}
        for a in actions[:split]:
            apply_actions(snapshot, a, scope=scope)  # type: ignore[arg-type]
        for a in actions[split:]:
            apply_actions(snapshot, a, scope=scope)  # type: ignore[arg-type]
        assert snapshot == full
    for a in actions:
        assert touches_shared_keys(a) == bool(
            [k for k in (*a.state_delta, *a.state_deletions) if k.startswith(("user:", "app:"))]
        )


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
        pytest.param({"a": 1}, {"a": None}, {"a": None}, id="none-is-a-value"),
        pytest.param({}, {"a": None}, {"a": None}, id="none-sets-a-missing-key"),
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


@pytest.mark.parametrize(
    ("state", "delta", "deleted", "expected"),
    [
        pytest.param({"a": 1, "b": 2}, {}, ["a"], {"b": 2}, id="deletion-removes"),
        pytest.param({"a": None}, {}, ["a"], {}, id="a-none-value-is-deleted-like-any"),
        pytest.param({}, {}, ["a"], {}, id="deleting-a-missing-key-is-harmless"),
        pytest.param({"a": 1}, {"b": None}, ["a"], {"b": None}, id="set-and-delete-others"),
    ],
)
def test_apply_delta_deletions(state: dict[str, Any], delta: dict[str, Any],
                               deleted: list[str], expected: dict[str, Any]) -> None:
    apply_delta(state, delta, deleted=deleted)
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
