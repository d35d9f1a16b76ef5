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
    "is_utf8",
    "shown",
]

MAX_INT = (1 << 31) - 1
"""The largest ``seq``, ``version`` or count a column holds."""


def check_str(value: Any, name: str, *, optional: bool = False, max_length: int = 255) -> Any:
    """Return ``value`` if it is a non-empty string of at most ``max_length`` characters (or
    None when ``optional``); raise StoreUsageError naming ``name`` otherwise."""
    if value is None and optional:
        return None
    if (
        not isinstance(value, str)
        or not value
        or len(value) > max_length
        or "\0" in value
        or not is_utf8(value)
    ):
        raise StoreUsageError(
            f"{name} must be a non-empty string of at most {max_length} characters without "
            f"NUL or lone surrogates{' or None' if optional else ''}, not {shown(value)}."
        )
    return value


def shown(value: object) -> str:
    """``repr(value)`` cut to a readable length for an error message; never raises (an int
    past Python's 4,300-digit ``str`` limit is described by its size instead)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        digits = int(value.bit_length() * 0.30103) + 1
        return f"<{'a negative' if value < 0 else 'an'} integer of about {digits:,} digits>"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not replace the error being reported
        return f"<a {type(value).__name__}>"
    return text if len(text) <= 200 else f"{text[:150]}…({len(text)} characters)"


def is_utf8(text: str) -> bool:
    """True when ``text`` can be stored as UTF-8 (it holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_filename(value: Any) -> str:
    """Return ``value`` if it is an artifact filename (a non-empty string of at most 512
    characters without NUL or lone surrogates: what every backend stores alike); raise
    StoreUsageError otherwise."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 512
        or "\0" in value
        or not is_utf8(value)
    ):
        raise StoreUsageError(
            f"Artifact filenames must be non-empty strings of at most 512 characters without "
            f"NUL or lone surrogates, not {shown(value)}."
        )
    return value


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is a bool; raise StoreUsageError naming ``name`` otherwise."""
    if not isinstance(value, bool):
        raise StoreUsageError(f"{name} must be True or False, not {shown(value)}.")
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
            f"{' or None' if optional else ''}, not {shown(value)}."
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
        raise StoreUsageError(f"{name} must be an int or None, not {shown(value)}.")
    if minimum is not None and value < minimum:
        raise StoreUsageError(f"{name} must be >= {minimum}, not {shown(value)}.")
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
        raise StoreUsageError(f"{name} must be {kind} number, not {shown(value)}.")
    return float(value)


def check_lookup(session_id: object) -> str:
    """Return ``session_id`` if it is a string a session may be looked up by. Any string may
    (an unknown one is SessionNotFoundError later); a non-string is StoreUsageError, and a
    string holding NUL or a lone surrogate is SessionNotFoundError at once."""
    if not isinstance(session_id, str):
        raise StoreUsageError(f"session_id must be a string, not {shown(session_id)}.")
    if "\0" in session_id or not is_utf8(session_id):
        # No stored id holds NUL or a lone surrogate (creation refuses both), and PostgreSQL
        # cannot even compare one.
        raise SessionNotFoundError(session_id)
    return session_id
