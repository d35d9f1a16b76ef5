"""Checks every framework door (``eventstore.integrations.<framework>``) passes: its sorted
``__all__`` is exactly its public surface, and without its extra it fails in one line naming it."""

from __future__ import annotations

import importlib
import sys

import pytest


def _isort_key(name: str) -> tuple[int, str]:
    # isort-style order (ruff RUF022's default): CONSTANTS, then Classes, then functions.
    return 0 if name.isupper() else 1 if name[:1].isupper() else 2, name


def check_exports(package: str, public: set[str]) -> None:
    """``package.__all__`` is sorted (isort-style), resolvable and exactly ``public``."""
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names == sorted(names, key=_isort_key)
    assert set(names) == public
    assert len(names) == len(public)
    assert [name for name in names if not hasattr(module, name)] == []


def check_needs_extra(monkeypatch: pytest.MonkeyPatch, package: str, *, sdk: str,
                      extra: str, door: str | None = None) -> None:
    """Importing ``package`` with ``sdk`` missing raises one ImportError line naming ``extra``
    and the door (``package`` unless given) that needs it."""
    # Forget every door imported so far (restored afterwards), so the import runs again.
    for name in [m for m in sys.modules if m.startswith("eventstore.integrations.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, sdk, None)
    with pytest.raises(ImportError) as caught:
        importlib.import_module(package)
    message = str(caught.value)
    assert f"install agent-eventstore[{extra}]" in message
    assert (door or package) in message
    assert "\n" not in message
