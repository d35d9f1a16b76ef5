"""``evs demo --model``: which model it runs on, and one-line errors before anything is stored."""

from __future__ import annotations

from _extras import require_extra

for _module, _extra in (
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google.genai", "gemini"),
):
    require_extra(_module, _extra)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from _cli_support import invoke  # noqa: E402

from runtime.cli._demo_model import demo_model  # noqa: E402
from runtime.models import AnthropicModel, GeminiModel, OpenAIChatModel  # noqa: E402

NO_KEYS = {
    "OPENAI_API_KEY": "",
    "ANTHROPIC_API_KEY": "",
    "GEMINI_API_KEY": "",
    "GOOGLE_API_KEY": "",
}


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        pytest.param("openai:gpt-4o-mini", "OPENAI_API_KEY", id="openai"),
        pytest.param("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY", id="anthropic"),
        pytest.param("gemini:gemini-2.5-flash", "GEMINI_API_KEY", id="gemini"),
    ],
)
def test_demo_without_a_key_is_one_line_naming_the_variable(
    spec: str, variable: str, db: Path
) -> None:
    result = invoke("demo", "--db", str(db), "--model", spec, env=NO_KEYS)
    assert result.exit_code == 1
    assert result.stderr == f"evs: error: --model {spec} needs an API key: set {variable}.\n"
    assert "Session" not in result.stdout
    assert not db.exists()  # nothing was created


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("mistral:large", id="unknown-provider"),
        pytest.param("openai", id="no-model"),
        pytest.param("openai-compatible:localhost:llama3", id="no-url"),
    ],
)
def test_demo_refuses_a_malformed_model_as_bad_usage(spec: str, db: Path) -> None:
    result = invoke("demo", "--db", str(db), "--model", spec, env=NO_KEYS)
    assert result.exit_code == 2
    assert result.stderr.startswith("evs: error: --model ")
    assert result.stderr.count("\n") == 1


def test_demo_model_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    assert demo_model(None) is None
    assert demo_model("scripted") is None
    openai = demo_model("openai:gpt-4o-mini")
    assert isinstance(openai, OpenAIChatModel)
    assert openai.model == "gpt-4o-mini"
    assert isinstance(demo_model("anthropic:claude-sonnet-4-6"), AnthropicModel)
    assert isinstance(demo_model("gemini:gemini-2.5-flash"), GeminiModel)
    local = demo_model("openai-compatible:http://localhost:11434/v1:llama3.2:3b")
    assert isinstance(local, OpenAIChatModel)
    assert local.model == "llama3.2:3b"
    assert str(local._client.base_url) == "http://localhost:11434/v1/"
