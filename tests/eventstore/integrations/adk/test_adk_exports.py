"""The ADK door: ``eventstore.integrations.adk`` exports exactly its sorted ``__all__``, the
import path of earlier releases (``adk_memory``) still works, and without google-adk each path
fails in one line naming the ``[adk]`` extra."""

from __future__ import annotations

import pytest
from _doors import check_exports, check_needs_extra
from _extras import require_extra

require_extra("google.adk", "adk")

PUBLIC = {
    "EXTENSION_KEY", "IDEMPOTENT_ATTRIBUTE", "EventStoreArtifactService",
    "EventStoreDurabilityPlugin", "EventStoreMemoryService", "ToolCallInDoubt",
    "EventStoreSessionService", "event_from_adk_json", "event_to_adk_json", "from_adk_event",
    "to_adk_events", "to_adk_memory",
}


def test_adk_exports_its_sorted_all() -> None:
    check_exports("eventstore.integrations.adk", PUBLIC)


def test_adk_memory_keeps_its_old_import_path() -> None:
    from eventstore.integrations import adk
    from eventstore.integrations.adk_memory import EventStoreMemoryService, to_adk_memory

    assert EventStoreMemoryService is adk.EventStoreMemoryService
    assert to_adk_memory is adk.to_adk_memory


@pytest.mark.parametrize("package", [
    pytest.param("eventstore.integrations.adk", id="adk"),
    pytest.param("eventstore.integrations.adk_memory", id="adk_memory"),
])
def test_adk_without_google_adk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, package: str
) -> None:
    check_needs_extra(monkeypatch, package, sdk="google.adk", extra="adk",
                      door="eventstore.integrations.adk")
