"""Who claimed a call and when (docs/protocol.md §3), and the age rule of ``evs rerun``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_RERUN_MIN_AGE", "claim_age", "describe_claim"]

DEFAULT_RERUN_MIN_AGE = 300.0
"""Seconds: ``evs rerun`` refuses a call claimed more recently than this unless ``--force``
(the claimant may still be running it)."""


def claim_age(claim: Mapping[str, Any], *, now: float | None = None) -> float | None:
    """Seconds since the claim was made (``claimed_by.at``, else the claim event's timestamp);
    ``None`` when neither is known."""
    by = claim.get("claimed_by")
    at = by.get("at") if isinstance(by, Mapping) else claim.get("timestamp")
    if not isinstance(at, int | float) or isinstance(at, bool):
        return None
    return max(0.0, (time.time() if now is None else now) - float(at))


def describe_claim(claim: Mapping[str, Any], *, now: float | None = None) -> str:
    """One line: 'started 4 s ago by invocation X on host H (pid P) — it may still be running'."""
    by = claim.get("claimed_by")
    seq = claim.get("seq")
    if not isinstance(by, Mapping):
        return f"started at seq {seq} (the claim does not record by whom or when)"
    age = claim_age(claim, now=now)
    when = f"{age:.0f} s ago" if age is not None else "at an unknown time"
    return (
        f"started {when} (seq {seq}) by invocation {by.get('invocation_id')} on host "
        f"{by.get('host')} (pid {by.get('pid')}) — it may still be running"
    )
