"""The LangGraph door: ``eventstore.integrations.langgraph`` exports exactly its sorted
``__all__``, and without LangGraph fails in one line naming the ``[langgraph]`` extra."""

from __future__ import annotations

import pytest
from _doors import check_exports, check_needs_extra
from _extras import require_extra

require_extra("langgraph.checkpoint.base", "langgraph")

PUBLIC = {"METADATA_KEY", "CorruptThreadError", "EventStoreSaver"}


def test_langgraph_exports_its_sorted_all() -> None:
    check_exports("eventstore.integrations.langgraph", PUBLIC)


def test_langgraph_without_langgraph_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    check_needs_extra(monkeypatch, "eventstore.integrations.langgraph",
                      sdk="langgraph.checkpoint.base", extra="langgraph")
