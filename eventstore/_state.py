"""State: the fold of the events' state deltas, and its scopes.

The fold rule (one rule, everywhere): deltas apply in ``seq`` order; for each key of a delta, a
``None`` value deletes the key and any other value replaces the stored value whole — nested
mappings are *not* merged key by key across events. (Parallel tool calls inside one step do
deep-merge their deltas into one event before it is stored; that is the runtime's business.)

Key scopes, by prefix: none → the session; ``user:`` → every session of the same app and user;
``app:`` → every session of the app; ``temp:`` → never stored (stripped before an event is
appended).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "apply_delta",
    "fold_state",
    "has_shared_keys",
    "session_part",
    "shared_part",
    "strip_temp",
]

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


def apply_delta(state: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Apply one delta to ``state`` in place (``None`` deletes, anything else replaces)."""
    for key, value in delta.items():
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value


def fold_state(
    deltas: Iterable[Mapping[str, Any]], initial: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return the state obtained by applying ``deltas`` in order on top of ``initial``."""
    state = dict(initial or {})
    for delta in deltas:
        apply_delta(state, delta)
    return state


def strip_temp(delta: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``delta`` without its ``temp:`` keys (they are never persisted)."""
    return {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}


def has_shared_keys(delta: Mapping[str, Any]) -> bool:
    """Return True when ``delta`` touches ``user:`` or ``app:`` keys."""
    return any(k.startswith((USER_PREFIX, APP_PREFIX)) for k in delta)


def session_part(delta: Mapping[str, Any]) -> dict[str, Any]:
    """Return the session-scoped keys of ``delta`` (no prefix)."""
    return {k: v for k, v in delta.items() if not k.startswith((USER_PREFIX, APP_PREFIX))}


def shared_part(delta: Mapping[str, Any], *, user: bool) -> dict[str, Any]:
    """Return the ``user:`` keys (``user=True``) or the ``app:`` keys of ``delta``."""
    prefix = USER_PREFIX if user else APP_PREFIX
    return {k: v for k, v in delta.items() if k.startswith(prefix)}
