"""runtime.models: its public surface, imports without extras, and one-line errors naming them."""

from __future__ import annotations

from _extras import require_extra

for _module, _extra in (
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google.genai", "gemini"),
):
    require_extra(_module, _extra)

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import runtime  # noqa: E402
import runtime.models  # noqa: E402
from runtime.models import (  # noqa: E402
    AnthropicModel,
    GeminiModel,
    ModelConfigurationError,
    ModelError,
    OpenAIChatModel,
)

ROOT = Path(__file__).resolve().parents[3]


def test_runtime_models_exports_exactly_its_sorted_all() -> None:
    names = list(runtime.models.__all__)
    assert names == sorted(names)
    public = {n for n in vars(runtime.models) if not n.startswith("_")}
    assert public == set(names)
    assert issubclass(ModelError, runtime.AgentRuntimeError)
    assert "StreamingModel" in runtime.__all__


BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("openai", "anthropic") or name.startswith("google.genai"):
            raise ImportError(f"No module named {name!r} (blocked)")
        return None
sys.meta_path.insert(0, Block())
import runtime, runtime.models
from runtime.models import AnthropicModel, GeminiModel, MissingExtraError, OpenAIChatModel
for adapter, extra in ((OpenAIChatModel, "openai"), (AnthropicModel, "anthropic"),
                       (GeminiModel, "gemini")):
    try:
        adapter("some-model", api_key="k")
    except MissingExtraError as exc:
        assert exc.extra == extra
        print(exc)
assert not any(m.split(".")[0] in ("openai", "anthropic") for m in sys.modules)
"""


def test_adapters_without_their_extra_say_what_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "OpenAIChatModel needs the openai package: install agent-eventstore[openai].",
        "AnthropicModel needs the anthropic package: install agent-eventstore[anthropic].",
        "GeminiModel needs the google.genai package: install agent-eventstore[gemini].",
    ]


@pytest.mark.parametrize(
    ("adapter", "variables", "named"),
    [
        pytest.param(OpenAIChatModel, ["OPENAI_API_KEY"], "OPENAI_API_KEY", id="openai"),
        pytest.param(AnthropicModel, ["ANTHROPIC_API_KEY"], "ANTHROPIC_API_KEY", id="anthropic"),
        pytest.param(
            GeminiModel, ["GEMINI_API_KEY", "GOOGLE_API_KEY"], "GEMINI_API_KEY", id="gemini"
        ),
    ],
)
def test_a_missing_key_names_the_environment_variable(
    adapter: type, variables: list[str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in variables:
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ModelConfigurationError, match=named) as caught:
        adapter("some-model")
    assert caught.value.env_var == named
    assert "\n" not in str(caught.value)


def test_an_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1")
    assert repr(model) == "OpenAIChatModel('llama3.2')"
