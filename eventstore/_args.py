"""Argument checks of the store façade: done once, before any backend sees a value.

Every public ``EventStore`` method checks its arguments here, so that a bad argument raises the
same StoreUsageError (naming the argument) on every backend instead of whatever each driver makes
of it. Bounds of ``seq`` ranges are clamped into what a column can hold: a bound past every
possible ``seq`` means "no bound", never an overflow.
"""

from __future__ import annotations

from typing import Any

from ._exceptions import SessionNotFoundError, StoreUsageError

__all__ = [
    "MAX_INT",
    "check_bool",
    "check_filename",
    "check_int",
    "check_lookup",
    "check_number",
    "check_seq_bound",
    "check_str",
]

MAX_INT = (1 << 31) - 1
"""The largest ``seq``, ``version`` or count a column holds."""


def check_str(value: Any, name: str, *, optional: bool = False, max_length: int = 255) -> Any:
    """Return ``value`` if it is a non-empty string of at most ``max_length`` characters (or
    None when ``optional``); raise StoreUsageError naming ``name`` otherwise."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > max_length or "\0" in value:
        raise StoreUsageError(
            f"{name} must be a non-empty string of at most {max_length} characters without "
            f"NUL{' or None' if optional else ''}, not {value!r}."
        )
    return value


def check_filename(value: Any) -> str:
    """Return ``value`` if it is an artifact filename (a non-empty string of at most 512
    characters without NUL); raise StoreUsageError otherwise."""
    if not isinstance(value, str) or not value or len(value) > 512 or "\0" in value:
        raise StoreUsageError(
            f"Artifact filenames must be non-empty strings of at most 512 characters without "
            f"NUL, not {value!r}."
        )
    return value


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is a bool; raise StoreUsageError naming ``name`` otherwise."""
    if not isinstance(value, bool):
        raise StoreUsageError(f"{name} must be True or False, not {value!r}.")
    return value


def check_int(
    value: Any, name: str, *, optional: bool = False, minimum: int = 0, maximum: int = MAX_INT
) -> Any:
    """Return ``value`` if it is an int (not a bool) in ``minimum..maximum`` (or None when
    ``optional``); raise StoreUsageError naming ``name`` otherwise."""
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise StoreUsageError(
            f"{name} must be an int between {minimum} and {maximum}"
            f"{' or None' if optional else ''}, not {value!r}."
        )
    return value


def check_seq_bound(value: Any, name: str, *, minimum: int | None = None) -> int | None:
    """Return a ``seq`` bound (or a count) clamped into ``0..MAX_INT``, or None.

    Refuses non-ints and values below ``minimum`` (when given) with StoreUsageError naming
    ``name``; any other int is clamped (a negative bound selects nothing below 1, a huge one
    means no bound).
    """
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise StoreUsageError(f"{name} must be an int or None, not {value!r}.")
    if minimum is not None and value < minimum:
        raise StoreUsageError(f"{name} must be >= {minimum}, not {value}.")
    return max(0, min(value, MAX_INT))


def check_number(value: Any, name: str, *, positive: bool = True) -> float:
    """Return ``value`` as a float if it is a finite (positive) real number; raise
    StoreUsageError naming ``name`` otherwise."""
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or value != value  # NaN
        or value in (float("inf"), float("-inf"))
        or (positive and value <= 0)
    ):
        kind = "a positive" if positive else "a finite"
        raise StoreUsageError(f"{name} must be {kind} number, not {value!r}.")
    return float(value)


def check_lookup(session_id: object) -> str:
    """Return ``session_id`` if it is a string a session may be looked up by. Any string may
    (an unknown one is SessionNotFoundError later); a non-string is StoreUsageError, and a
    string holding NUL is SessionNotFoundError at once."""
    if not isinstance(session_id, str):
        raise StoreUsageError(f"session_id must be a string, not {session_id!r}.")
    if "\0" in session_id:
        # No stored id holds NUL (creation refuses it), and PostgreSQL cannot even compare one.
        raise SessionNotFoundError(session_id)
    return session_id
