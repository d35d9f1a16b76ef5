"""Event ids: ``new_event_id`` hands out UUID4 hex strings drawn fresh for every id, never the
same one twice, not across threads."""

from __future__ import annotations

import threading
import uuid

import pytest

from eventstore import Event, new_event_id


def test_ids_are_uuid4_hex_and_unique() -> None:
    ids = [new_event_id() for _ in range(5_000)]
    assert len(set(ids)) == len(ids)
    for given in ids:
        parsed = uuid.UUID(hex=given)
        assert parsed.hex == given
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert Event(author="user").id != Event(author="user").id


def test_threads_never_share_an_id() -> None:
    drawn: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(new_event_id() for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for into in drawn for i in into]
    assert len(set(every)) == len(every) == 8_000


def test_patching_uuid4_leaves_the_store_s_ids_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=7))
    assert new_event_id() != new_event_id()
    assert uuid.uuid4() == uuid.UUID(int=7)  # the caller's sequence is its own
