"""``docs/cli.md`` is what ``scripts/gen_cli_docs.py`` makes of today's commands: no drift."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_cli_docs.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_matches_the_commands_help() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == _generator().render(), (
        "docs/cli.md is out of date: run .venv/bin/python scripts/gen_cli_docs.py"
    )


def test_cli_page_covers_every_command_and_option() -> None:
    page = _generator().render()
    from typer.main import get_command

    from runtime.cli import app

    root = get_command(app)
    ctx = root.context_class(root, info_name="evs")
    for name in root.list_commands(ctx):  # type: ignore[attr-defined]
        command = root.get_command(ctx, name)  # type: ignore[attr-defined]
        assert f"## `evs {name}`" in page
        section = page.split(f"## `evs {name}`", 1)[1].split("\n## `evs ", 1)[0]
        for param in command.params:
            for opt in param.opts if param.param_type_name == "option" else ():
                assert opt in section, f"evs {name}: {opt} is not on the page"
    for sub in ("upgrade", "current", "rebuild-snapshots", "sign-artifacts"):
        assert f"### `evs db {sub}`" in page


def test_cli_docs_check_mode_fails_on_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text("# stale\n", encoding="utf-8")
    module = _generator()
    monkeypatch.setattr(module, "PAGE", stale)
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py", "--check"])
    assert module.main() == 1
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py"])
    assert module.main() == 0
    assert stale.read_text(encoding="utf-8") == module.render()
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py", "--check"])
    assert module.main() == 0


def test_cli_docs_script_runs_standalone() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
