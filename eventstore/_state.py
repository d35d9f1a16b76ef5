"""State: the fold of the events' state deltas, and its scopes.

The fold rule (one rule, everywhere): events apply in ``seq`` order; for each key of an event's
``state_delta`` the value replaces the stored value whole — ``None`` is a value like any other
(as in ADK: ``{"k": None}`` leaves ``"k" in state`` true), and nested mappings are *not* merged
key by key across events. Then each key of the event's ``state_deletions`` is removed: deleting
is its own typed record, never a value. (Parallel tool calls inside one step do
deep-merge their deltas into one event before it is stored; that is the runtime's business.)

Key scopes, by prefix: none → the session; ``user:`` → every session of the same app and user;
``app:`` → every session of the app; ``temp:`` → never stored (stripped before an event is
appended).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ._events import EventActions

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "apply_actions",
    "apply_delta",
    "touches_shared_keys",
    "fold_state",
    "has_shared_keys",
    "session_part",
    "shared_part",
    "strip_temp",
]

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


def apply_delta(
    state: dict[str, Any], delta: Mapping[str, Any], *, deleted: Iterable[str] = ()
) -> None:
    """Apply one delta to ``state`` in place: every value (``None`` too) replaces the key's
    value, then the keys in ``deleted`` are removed."""
    state.update(delta)
    for key in deleted:
        state.pop(key, None)


Scope = Literal["session", "user", "app"]


def _in_scope(key: str, scope: Scope) -> bool:
    if scope == "session":
        return not key.startswith((USER_PREFIX, APP_PREFIX))
    return key.startswith(USER_PREFIX if scope == "user" else APP_PREFIX)


def apply_actions(state: dict[str, Any], actions: EventActions, *, scope: Scope) -> None:
    """Apply an event's state changes of one scope to ``state`` in place: its ``state_delta``
    keys of that scope (values replace), then its ``state_deletions`` of that scope."""
    delta = (session_part(actions.state_delta) if scope == "session"
             else shared_part(actions.state_delta, user=scope == "user"))
    apply_delta(state, delta,
                deleted=[k for k in actions.state_deletions if _in_scope(k, scope)])


def fold_state(
    deltas: Iterable[Mapping[str, Any]], initial: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return the state obtained by applying ``deltas`` in order on top of ``initial`` (values,
    ``None`` included, replace; deletions are ``apply_actions``' business)."""
    state = dict(initial or {})
    for delta in deltas:
        apply_delta(state, delta)
    return state


def strip_temp(delta: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``delta`` without its ``temp:`` keys (they are never persisted)."""
    return {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}


def has_shared_keys(delta: Iterable[str]) -> bool:
    """Return True when ``delta`` (a delta mapping, or any keys) touches ``user:`` or ``app:``
    keys."""
    return any(k.startswith((USER_PREFIX, APP_PREFIX)) for k in delta)


def touches_shared_keys(actions: EventActions) -> bool:
    """Return True when ``actions`` set or delete a ``user:`` or ``app:`` key (the event then
    belongs to a shared-state fold)."""
    return has_shared_keys(actions.state_delta) or has_shared_keys(actions.state_deletions)


def session_part(delta: Mapping[str, Any]) -> dict[str, Any]:
    """Return the session-scoped keys of ``delta`` (no prefix)."""
    return {k: v for k, v in delta.items() if not k.startswith((USER_PREFIX, APP_PREFIX))}


def shared_part(delta: Mapping[str, Any], *, user: bool) -> dict[str, Any]:
    """Return the ``user:`` keys (``user=True``) or the ``app:`` keys of ``delta``."""
    prefix = USER_PREFIX if user else APP_PREFIX
    return {k: v for k, v in delta.items() if k.startswith(prefix)}
