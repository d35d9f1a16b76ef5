"""The store's commands as a program of their own (``python -m eventstore.commands``, and its
old name ``python -m eventstore.cli``), their exported toolkit, and the rule that importing any
module of ``eventstore`` never imports ``runtime`` (the ``evs`` program itself is tested in
``tests/runtime/cli``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import eventstore.cli
import eventstore.commands

# Whole-module: each test starts Python (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
RUNTIME_COMMANDS = ("demo", "pending", "confirm", "respond", "rerun", "web")
STORE_COMMANDS = ("sessions", "show", "state", "tail", "verify", "export", "import", "db",
                  "prune", "retention")


def test_commands_exported_members() -> None:
    """The toolkit is what the ``evs`` program builds with: every exported name resolves, and
    every name ``runtime`` imports from ``eventstore.commands`` is exported (not a private
    room's)."""
    exported = set(eventstore.commands.__all__)
    assert all(hasattr(eventstore.commands, name) for name in exported)
    used: set[str] = set()
    for path in (REPO / "runtime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "eventstore.commands":
                used.update(alias.name for alias in node.names)
    assert len(used) > 5, used
    assert used <= exported, sorted(used - exported)
    assert callable(eventstore.commands.main)


def test_commands_importing_any_eventstore_module_does_not_import_runtime() -> None:
    code = """
import importlib, pkgutil, sys
import eventstore
names = ["eventstore"]
for info in pkgutil.walk_packages(eventstore.__path__, "eventstore."):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue  # importing it would run the command line
    names.append(info.name)
for name in names:
    importlib.import_module(name)
assert "eventstore.commands._app" in sys.modules, names
assert "eventstore.backends.sqlite.base" in sys.modules, names
leaked = sorted(m for m in sys.modules if m == "runtime" or m.startswith("runtime."))
assert not leaked, leaked
print(len(names))
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 15


@pytest.mark.parametrize("module", [pytest.param("eventstore.commands", id="new-name"),
                                    pytest.param("eventstore.cli", id="old-name")])
def test_commands_module_entry_point(module: str) -> None:
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1].split()
    for command in STORE_COMMANDS:
        assert command in commands
    for command in RUNTIME_COMMANDS:
        assert command not in commands


def test_commands_usage_error_is_one_line() -> None:
    result = subprocess.run([sys.executable, "-m", "eventstore.commands", "demo"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("evs: error: No such command 'demo'.")
    assert result.stderr.count("\n") == 1


def test_commands_old_name_is_the_same_surface() -> None:
    assert eventstore.cli.__all__ == eventstore.commands.__all__
    for name in eventstore.commands.__all__:
        assert getattr(eventstore.cli, name) is getattr(eventstore.commands, name), name


@pytest.mark.parametrize("module", [pytest.param("eventstore.commands", id="new-name"),
                                    pytest.param("eventstore.cli", id="old-name")])
def test_commands_usage_hint_names_the_module_run(module: str) -> None:
    result = subprocess.run([sys.executable, "-m", module, "frobnicate"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.endswith(f" -m {module} --help)\n"), result.stderr
