"""What the README and the docs tell a reader to type is real: every ``evs`` line of their code
blocks parses as an ``evs`` command (so a line pasted as it stands runs that command, not a
usage error), and the install docs list every extra ``pyproject.toml`` defines."""

from __future__ import annotations

import functools
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer

from runtime.cli import app

ROOT = Path(__file__).resolve().parent.parent
_EVS = re.compile(r"^(?:\S*/)?evs\s+(?!=)(.*)$")
_SPLIT = re.compile(r"\s(?:&&|\|\||\||;)\s")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def _evs_lines() -> list[tuple[str, str]]:
    """``(document:line, command)`` for each ``evs …`` command in a fenced block."""
    found = []
    for document in _documents():
        fenced = False
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if not fenced:
                continue
            code = re.split(r"\s#\s", f" {line.strip()}", maxsplit=1)[0].strip()
            for part in _SPLIT.split(code):
                if _EVS.match(part.strip()):
                    where = f"{document.relative_to(ROOT)}:{number}"
                    found.append((where, part.strip()))
    return found


@functools.cache
def _root() -> Any:
    return typer.main.get_command(app)  # built once: typer makes the tree anew on each call


def _take_group_options(group: Any, tokens: list[str], path: list[str]) -> None:
    """Move the group's own options (``evs --read-db URL sessions``) from ``tokens`` to
    ``path``, with their values."""
    options = {name: param for param in group.params for name in getattr(param, "opts", ())
               if name not in ("--help", "--version")}
    while tokens and tokens[0].split("=", 1)[0] in options:
        token = tokens.pop(0)
        path.append(token)
        param = options[token.split("=", 1)[0]]
        if "=" not in token and not getattr(param, "is_flag", False) and tokens:
            path.append(tokens.pop(0))


def _problem(command: str) -> str | None:
    """Why ``command`` does not parse as an ``evs`` command line, or None."""
    match = _EVS.match(command)
    assert match is not None
    tokens = shlex.split(match[1])
    node: Any = _root()
    path = ["evs"]
    while hasattr(node, "commands") and tokens:
        _take_group_options(node, tokens, path)
        if not tokens or tokens[0] not in node.commands:
            break
        path.append(tokens[0])
        node = node.commands[tokens.pop(0)]
    eager = {"--help", "--version"} & set(tokens)
    if hasattr(node, "commands") and not eager:
        return f"{' '.join(path)} needs a subcommand ({', '.join(sorted(node.commands))})"
    try:
        node.make_context(" ".join(path), tokens)
    except Exception as exc:  # click's UsageError (typer vendors click) or an eager Exit
        if type(exc).__name__ != "Exit":
            return f"{type(exc).__name__}: {exc}"
    return None


def test_docs_show_evs_commands() -> None:
    lines = _evs_lines()
    assert len(lines) >= 30
    assert any("db upgrade" in command for _, command in lines)


@pytest.mark.parametrize(("command", "problem"), [
    pytest.param("evs db current / db upgrade", "unexpected extra argument", id="two-in-one"),
    pytest.param("evs db", "needs a subcommand", id="group-alone"),
    pytest.param("evs show --no-such-option x", "No such option", id="unknown-option"),
])
def test_a_line_that_is_no_command_is_found(command: str, problem: str) -> None:
    found = _problem(command)
    assert found is not None
    assert problem in found


def test_every_evs_line_of_the_docs_is_a_command() -> None:
    problems = [f"{where}: {command!r}: {why}" for where, command in _evs_lines()
                if (why := _problem(command)) is not None]
    assert problems == []


def test_install_docs_list_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    [listed] = re.findall(r"The\s+extras\s+one\s+by\s+one:(.*?)\.\n\n", page, re.S)
    named = set(re.findall(r"`([a-z-]+)`", listed))
    assert named == set(extras) - {"all", "dev"}
