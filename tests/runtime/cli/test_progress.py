"""Progress on stderr for large exports, imports and verifications: only on a terminal."""

from __future__ import annotations

import io
import sys

import pytest

from eventstore.commands import _progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("terminal", "size", "shown"),
    [
        pytest.param(True, _progress.LARGE, True, id="large-on-a-terminal"),
        pytest.param(True, _progress.LARGE - 1, False, id="small"),
        pytest.param(False, _progress.LARGE * 10, False, id="piped"),
    ],
)
def test_progress_only_for_large_jobs_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, terminal: bool, size: int, shown: bool
) -> None:
    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("EVS_NO_PROGRESS", raising=False)
    with _progress.progress("Verifying", total=size) as tracker:
        tracker.advance(size)
    assert ("Verifying" in err.getvalue()) is shown


def test_progress_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("EVS_NO_PROGRESS", "1")
    with _progress.progress("Exporting", total=None, size=_progress.LARGE * 2):
        pass
    assert err.getvalue() == ""
