"""The Pydantic AI door: ``eventstore.integrations.pydantic_ai`` exports exactly its sorted
``__all__``, and without pydantic-ai fails in one line naming the ``[pydantic-ai]`` extra."""

from __future__ import annotations

import pytest
from _doors import check_exports, check_needs_extra
from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

PUBLIC = {
    "IN_DOUBT_KEY", "MESSAGE_KEY", "EventStoreAgent", "EventStoreModel", "EventStoreToolset",
    "RunJournal", "SessionAddress", "SessionMovedError", "messages_of",
}


def test_pydantic_ai_exports_its_sorted_all() -> None:
    check_exports("eventstore.integrations.pydantic_ai", PUBLIC)


def test_pydantic_ai_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    check_needs_extra(monkeypatch, "eventstore.integrations.pydantic_ai",
                      sdk="pydantic_ai.agent", extra="pydantic-ai")
