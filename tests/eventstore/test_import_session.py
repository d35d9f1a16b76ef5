"""``EventStore.import_session``: a session written from pages in one transaction, on every
backend — all of it, or nothing when the pages raise or a later page is refused."""

from __future__ import annotations

import pytest
from conftest import StoreFactory

from eventstore import Content, Event, EventActions, Part
from eventstore.store.facade import Artifact, EventStore, ImportBatch


def _event(i: int) -> Event:
    return Event(id=f"e{i}", author="agent", content=Content(role="model", parts=(
        Part(text=f"turn {i}"),)), actions=EventActions(state_delta={"n": i}))


def _pages(events: list[Event], size: int, *, fail_at: int | None = None,
           artifacts: tuple[Artifact, ...] = ()):  # type: ignore[no-untyped-def]
    batches = [events[i:i + size] for i in range(0, len(events), size)]
    served = 0

    def page() -> ImportBatch | None:
        nonlocal served
        if served == fail_at:
            raise RuntimeError("the file broke")
        if served == len(batches):
            return None
        served += 1
        last = served == len(batches)
        return ImportBatch(events=[EventStore._prepare(e)[1] for e in batches[served - 1]],
                           artifacts=artifacts if last else ())

    return page


async def test_pages_make_one_session(store_factory: StoreFactory) -> None:
    store = await store_factory()
    events = [_event(i) for i in range(10)]
    note = Artifact(filename="note.txt", version=0, mime_type="text/plain", data=b"hi",
                    created_at=1.0)
    count = await store.import_session(app_name="a", user_id="u", session_id="s",
                                       created_at=5.0, pages=_pages(events, 3,
                                                                    artifacts=(note,)))
    assert count == 10
    stored = await store.read("s")
    assert [(e.id, e.seq) for e in stored] == [(f"e{i}", i + 1) for i in range(10)]
    assert (await store.state("s"))["n"] == 9
    assert (await store.load_artifact("s", "note.txt")).data == b"hi"  # type: ignore[union-attr]


@pytest.mark.parametrize("fail_at", [0, 2, 4], ids=["first", "middle", "end"])
async def test_a_page_that_raises_leaves_nothing(store_factory: StoreFactory,
                                                 fail_at: int) -> None:
    store = await store_factory()
    events = [_event(i) for i in range(10)]
    with pytest.raises(RuntimeError, match="the file broke"):
        await store.import_session(app_name="a", user_id="u", session_id="s", created_at=None,
                                   pages=_pages(events, 3, fail_at=fail_at))
    assert (await store.list_sessions()).sessions == []
    # Nothing half-made blocks the next try.
    assert await store.import_session(app_name="a", user_id="u", session_id="s",
                                      created_at=None, pages=_pages(events, 3)) == 10
