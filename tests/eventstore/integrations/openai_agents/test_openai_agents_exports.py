"""The OpenAI Agents door: ``eventstore.integrations.openai_agents`` exports exactly its sorted
``__all__``, and without the SDK fails in one line naming the ``[openai-agents]`` extra."""

from __future__ import annotations

import pytest
from _doors import check_exports, check_needs_extra
from _extras import require_extra

require_extra("agents", "openai-agents")

PUBLIC = {
    "CACHE_NAME", "METADATA_KEY", "RUN_KEY", "CallInDoubtError", "CompactionRequest",
    "Compactor", "ConcurrentRunError", "DurableModel", "EventStoreRunner", "EventStoreSession",
    "RecordedToolError", "ResponsesCompactor", "SessionItemError", "mirrored_call_id",
}


def test_openai_agents_exports_its_sorted_all() -> None:
    check_exports("eventstore.integrations.openai_agents", PUBLIC)


def test_openai_agents_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    check_needs_extra(monkeypatch, "eventstore.integrations.openai_agents",
                      sdk="agents.memory.session_settings", extra="openai-agents")
