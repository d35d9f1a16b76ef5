"""The import layout: which package may import which, and no import circle anywhere.

The graph is built from the source with ``ast`` (nothing is imported), one node per module of
``eventstore`` and ``runtime``. ``from package import name`` is an edge to ``package.name`` when
that is a module, else to ``package``; the implicit import of a module's parent packages is not
an edge (every module would otherwise "import" its package's ``__init__``). Two graphs:

- *at import time*: the module-level imports (inside module-level ``try``/``if`` too) that are
  not under ``if TYPE_CHECKING:``; imports inside functions run late and are left out;
- *for types*: the same plus the ``TYPE_CHECKING`` imports. A circle there is one that
  ``TYPE_CHECKING`` hides but does not remove; the cure is to move the type down to a module
  both sides use (``runtime._protocols``, ``runtime.tools._model_request``).

The rules:

1. no circle among the modules of ``eventstore``, nor among those of ``runtime``, in either graph;
2. ``eventstore`` never imports ``runtime`` (no import anywhere in a module, functions included);
3. a backend (``eventstore.backends.*``) never reaches the store façade (``eventstore.store``),
   the package root ``eventstore`` (which re-exports the façade), the memory service
   (``eventstore.recall.service``), the CLI or the integrations, directly or through the modules
   it imports. Skipped while ``eventstore/backends`` does not exist (the flat layout);
4. an integration (``eventstore.integrations.*``) imports of ``eventstore`` only its public API:
   ``eventstore`` itself, the ``eventstore.integrations`` package, its own framework's package
   (``eventstore.integrations.adk`` and its rooms for ADK's) and the rooms every door shares,
   ``eventstore.integrations._*`` (``_handle``: the store's home loop). Two exceptions are
   judged honest: ``eventstore._gcpause``, which pauses the garbage collector around a bulk
   decode, and ``eventstore._inline``, which tells a driver that the running loop's caller waits
   anyway (the LangGraph saver's sync API). They are process tools, not part of the store's API
   (exporting them from ``eventstore`` would be the dishonest choice), and they are leaves: they
   import nothing of ``eventstore``, which the test checks, so an exception cannot grow into a
   back door to the store's internals;
5. no integration imports another framework's package, and the shared rooms import none: a
   framework's door changes without touching another's;
6. each framework is one package under ``eventstore.integrations`` (no flat family of prefixed
   modules beside it): the only plain modules there are the shared rooms (``_*``) and the import
   paths of earlier releases kept as aliases of one package (``COMPAT_ALIASES``);
7. the shared base (``eventstore.backends.sql``) is the only thing both SQL backends import from
   each other's level: a module of ``eventstore.backends.sqlite`` or ``…postgres`` imports, of
   ``eventstore.backends``, only its own package, the shared base and the backend contract
   (``protocol`` with its ``records`` and ``rules``), never the other backend nor the memory
   backend; the shared base imports only itself and the contract (it finds a backend's rooms
   by name in that backend's own package); and both packages have every room the base names;
8. ``evs`` is one command line in two packages: ``runtime.cli`` is the program (the console
   script's ``_evs_launcher:main`` runs it), ``eventstore.commands`` the store's commands and
   the toolkit they are all built with. The launcher imports only the standard library at
   import time (it must load before a Ctrl-C can land); ``eventstore.cli``, the old name, only
   re-exports ``eventstore.commands`` and nothing of ours imports it; and of ``runtime`` only
   the program and what shows a log as it does (``RUNTIME_VIEWS``) import the commands' toolkit:
   the loop never depends on the command line.
"""

from __future__ import annotations

import ast
import functools
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eventstore", "runtime")
BACKENDS = "eventstore.backends"
FACADE = ("eventstore", "eventstore.store", "eventstore.recall.service", "eventstore.commands",
          "eventstore.cli", "eventstore.integrations")
"""What a backend must not reach: each name and every module under it (the root only itself)."""
INTEGRATIONS = "eventstore.integrations"
COMPAT_ALIASES = {"eventstore.integrations.adk_memory": "eventstore.integrations.adk"}
"""Old import paths kept as modules that re-export one framework package's names."""
INTEGRATION_EXCEPTIONS = {"eventstore._gcpause", "eventstore._inline"}
"""Private eventstore modules an integration may import (see the module docstring)."""
SQL_BACKENDS = ("eventstore.backends.sqlite", "eventstore.backends.postgres")
SHARED_BASE = "eventstore.backends.sql"
CONTRACT = ("eventstore.backends.protocol", "eventstore.backends.records",
            "eventstore.backends.rules")
"""What every backend implements and judges by (rule 7)."""
COMMANDS = "eventstore.commands"
OLD_COMMANDS = "eventstore.cli"
PROGRAM = "runtime.cli"
RUNTIME_VIEWS = ("runtime.web", "runtime.mcp", "runtime.testing")
"""Of ``runtime``, what may use the commands' toolkit besides the program (rule 8): the web
inspector and the MCP server show a session as ``evs show`` does, and recorded-session tests
read ``evs export``'s format."""


@dataclass(frozen=True, kw_only=True)
class Module:
    """One module of the source tree: its dotted name, file and syntax tree."""

    name: str
    path: Path
    is_package: bool
    tree: ast.Module


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name=name, path=path, is_package=is_package,
                                 tree=ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(
    body: Sequence[ast.stmt], *, types: bool
) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if types or not _is_type_checking(node.test):
                yield from _module_level(node.body, types=types)
            yield from _module_level(node.orelse, types=types)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(handler.body for handler in node.handlers)):
                yield from _module_level(block, types=types)


def _everywhere(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _known(name: str) -> str | None:
    """The innermost module of ours that ``name`` lies in, or None for a third-party one."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: Module, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            found = _known(alias.name)
            if found is not None:
                yield found
        return
    if node.level:
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        parts = package.split(".")
        base = parts[: len(parts) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    for alias in node.names:
        found = _known(f"{source}.{alias.name}") if f"{source}.{alias.name}" in MODULES else None
        found = found if found is not None else _known(source)
        if found is not None:
            yield found


@functools.cache
def _graph(kind: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES.values():
        if kind == "anywhere":
            nodes = list(_everywhere(module.tree))
        else:
            nodes = list(_module_level(module.tree.body, types=kind == "types"))
        graph[module.name] = {
            target for node in nodes for target in _targets(module, node) if target != module.name
        }
    return graph


def _circles(graph: dict[str, set[str]], members: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module among ``members`` (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node] & members):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                popped = stack.pop()
                on_stack.discard(popped)
                component.append(popped)
                if popped == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(members):
        if node not in index:
            visit(node)
    return circles


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _reachable(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module ``start`` reaches through ``graph``, each with one path that gets there."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop()
        for target in sorted(graph[node]):
            if target not in paths:
                paths[target] = [*paths[node], target]
                todo.append(target)
    return paths


@pytest.mark.parametrize("kind", [pytest.param("import", id="at-import-time"),
                                  pytest.param("types", id="for-types")])
@pytest.mark.parametrize("package", PACKAGES)
def test_import_layout_no_circle(package: str, kind: str) -> None:
    graph = _graph(kind)
    members = {name for name in MODULES if _within(name, package)}
    circles = _circles(graph, members)
    assert circles == [], (
        f"{package} has import circles ({kind} graph); move the shared type down to a module "
        f"both sides import: " + "; ".join(" <-> ".join(circle) for circle in circles)
    )


def test_import_layout_eventstore_never_imports_runtime() -> None:
    graph = _graph("anywhere")
    leaks = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items() if _within(name, "eventstore")
        for target in targets if _within(target, "runtime")
    )
    assert leaks == []


def test_import_layout_backends_never_reach_the_facade() -> None:
    if not (ROOT / "eventstore" / "backends").is_dir():
        pytest.skip("eventstore/backends does not exist yet (the flat layout)")
    graph = _graph("anywhere")
    backends = sorted(name for name in MODULES if _within(name, BACKENDS))
    assert len(backends) > 10, backends
    breaches = []
    for backend in backends:
        for target, path in _reachable(graph, backend).items():
            if any(target == banned if banned == "eventstore" else _within(target, banned)
                   for banned in FACADE):
                breaches.append(" -> ".join(path))
    assert breaches == []


def _door(name: str) -> str | None:
    """The framework package an integration module belongs to (None for the shared rooms and
    the ``eventstore.integrations`` package itself)."""
    if name in COMPAT_ALIASES:
        return COMPAT_ALIASES[name]
    parts = name.split(".")
    if len(parts) < 3 or parts[2].startswith("_"):
        return None
    return ".".join(parts[:3])


def test_import_layout_integrations_use_the_public_api() -> None:
    graph = _graph("anywhere")
    integrations = sorted(name for name in MODULES if _within(name, INTEGRATIONS))
    assert len(integrations) > 5, integrations
    private = []
    for name in integrations:
        door = _door(name)
        for target in graph[name]:
            if not _within(target, "eventstore") or target in ("eventstore", INTEGRATIONS):
                continue
            if target in INTEGRATION_EXCEPTIONS:
                continue
            if _within(target, INTEGRATIONS) and _door(target) in (None, door):
                continue
            private.append(f"{name} imports {target}")
    assert private == [], (
        "an integration uses only eventstore's public API, its own package and the shared "
        "rooms: " + ", ".join(sorted(private))
    )
    for exception in sorted(INTEGRATION_EXCEPTIONS):
        assert {t for t in graph[exception] if _within(t, "eventstore")} == set(), exception


def test_import_layout_no_integration_imports_another_framework() -> None:
    graph = _graph("anywhere")
    crossings = sorted(
        f"{name} imports {target}"
        for name in MODULES if _within(name, INTEGRATIONS)
        for target in graph[name]
        if _within(target, INTEGRATIONS) and _door(target) is not None
        and _door(target) != _door(name)
    )
    assert crossings == [], "a framework's door imports another's: " + ", ".join(crossings)


def test_import_layout_each_framework_is_a_package() -> None:
    doors = sorted(name for name in MODULES
                   if name.count(".") == 2 and _within(name, INTEGRATIONS))
    assert {"eventstore.integrations.adk", "eventstore.integrations.langgraph",
            "eventstore.integrations.openai_agents"} <= set(doors), doors
    flat = sorted(
        name for name in doors
        if not MODULES[name].is_package and not name.rpartition(".")[2].startswith("_")
        and name not in COMPAT_ALIASES
    )
    assert flat == [], "a framework's door is a package, not a module beside them: " + str(flat)
    for alias, package in COMPAT_ALIASES.items():
        assert MODULES[package].is_package, package
        assert {t for t in _graph("anywhere")[alias] if _within(t, "eventstore")} <= {
            t for t in MODULES if _within(t, package)}, alias


def test_import_layout_sql_backends_share_only_the_base() -> None:
    graph = _graph("anywhere")
    judged = [name for name in MODULES
              if _within(name, SHARED_BASE) or any(_within(name, p) for p in SQL_BACKENDS)]
    assert len(judged) > 20, judged
    crossings = []
    for name in judged:
        own = next((p for p in SQL_BACKENDS if _within(name, p)), SHARED_BASE)
        for target in graph[name]:
            if not _within(target, BACKENDS) or target == BACKENDS:
                continue
            if _within(target, own) or _within(target, SHARED_BASE) or target in CONTRACT:
                continue
            crossings.append(f"{name} imports {target}")
    assert crossings == [], (
        "an SQL backend shares code with the other only through the shared base: "
        + ", ".join(sorted(crossings))
    )
    rooms = ast.literal_eval(next(
        node.value for node in ast.parse((ROOT / "eventstore/backends/sql/jobs.py").read_text())
        .body if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "_ROOMS" for t in node.targets)))
    missing = sorted(f"{package}.{room}" for package in SQL_BACKENDS
                     for room in rooms.values() if f"{package}.{room}" not in MODULES)
    assert missing == []


def test_import_layout_one_command_line() -> None:
    launcher = ast.parse((ROOT / "_evs_launcher.py").read_text(encoding="utf-8"))
    loaded = sorted({alias.name.partition(".")[0] if isinstance(node, ast.Import)
                     else (node.module or "").partition(".")[0]
                     for node in _module_level(launcher.body, types=False)
                     for alias in node.names})
    stdlib = sorted(name for name in loaded if name in sys.stdlib_module_names)
    assert loaded == stdlib, "the launcher imports only the standard library at import time"
    script = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert script["project"]["scripts"] == {"evs": "_evs_launcher:main"}
    graph = _graph("anywhere")
    assert {t for t in graph[OLD_COMMANDS] if _within(t, "eventstore")} == {COMMANDS}
    users_of_old = sorted(name for name, targets in graph.items()
                          if OLD_COMMANDS in targets and name != OLD_COMMANDS)
    assert users_of_old == [], f"{OLD_COMMANDS} is an old name, kept for users only"
    toolkit_users = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items() if _within(name, "runtime")
        and not any(_within(name, allowed) for allowed in (PROGRAM, *RUNTIME_VIEWS))
        for target in targets if _within(target, COMMANDS)
    )
    assert toolkit_users == [], "the loop never depends on the command line: " + ", ".join(
        toolkit_users)
    assert any(_within(t, COMMANDS) for t in graph[f"{PROGRAM}._app"]), \
        "the program mounts the store's commands"
