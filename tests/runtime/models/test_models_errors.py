"""No HTTP answer at all: every adapter raises ModelConnectionError, never an SDK exception."""

from __future__ import annotations

from _extras import require_extra

for _module, _extra in (
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google.genai", "gemini"),
):
    require_extra(_module, _extra)

import socket  # noqa: E402
from collections.abc import Callable  # noqa: E402

import pytest  # noqa: E402

from eventstore import Content, Part  # noqa: E402
from runtime import Model, ModelRequest  # noqa: E402
from runtime.models import (  # noqa: E402
    AnthropicModel,
    GeminiModel,
    ModelConnectionError,
    OpenAIChatModel,
)


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("build", "provider"),
    [
        pytest.param(
            lambda url: OpenAIChatModel("m", api_key="k", base_url=url + "/v1", max_retries=0),
            "openai",
            id="openai",
        ),
        pytest.param(
            lambda url: AnthropicModel(
                "claude-sonnet-4-6", api_key="k", base_url=url, max_retries=0
            ),
            "anthropic",
            id="anthropic",
        ),
        pytest.param(
            lambda url: GeminiModel("gemini-2.5-flash", api_key="k", base_url=url, max_retries=0),
            "gemini",
            id="gemini",
        ),
    ],
)
async def test_an_unreachable_endpoint_is_a_connection_error(
    build: Callable[[str], Model], provider: str
) -> None:
    model = build(_closed_port_url())
    request = ModelRequest(contents=[Content(role="user", parts=(Part(text="Hi"),))])
    with pytest.raises(ModelConnectionError) as caught:
        await model.generate(request)
    assert caught.value.provider == provider
    assert caught.value.status_code is None
    assert caught.value.__cause__ is not None
