"""The collector around a long decode (``eventstore._gcpause``): paused while a long read
builds, what it built moved to the oldest generation, the process's own collector settings
and frozen objects left as they were, and young garbage cycles still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _evs_support import text_event

from eventstore import EventStore, open_store
from eventstore._gcpause import _GENERATIONAL, LONG_BATCH, pause, resume

generational = pytest.mark.skipif(
    not _GENERATIONAL, reason="free-threaded CPython: no generations to move objects between")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EventStore]:
    opened = await open_store(tmp_path / "gc.db", auto_upgrade=True)
    await opened.create_session(app_name="app", user_id="u", session_id="s")
    await opened.append("s", [text_event(f"m{i}", id=f"e{i}") for i in range(400)],
                        expected_version=0)
    yield opened
    await opened.aclose()


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def _young(obj: object) -> bool:
    return any(o is obj for generation in (0, 1) for o in gc.get_objects(generation))


@generational
async def test_a_long_read_leaves_what_it_built_in_the_oldest_generation(
    store: EventStore,
) -> None:
    gc.enable()
    mappings = await store.read_mappings("s")
    assert len(mappings) == 400
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    # The mappings the caller keeps skip the young collections...
    assert not _young(mappings[0])
    assert not _young(mappings[-1])
    assert any(o is mappings[0] for o in gc.get_objects(2))
    # ...while a short read leaves the collector's generations as they are. (After a full
    # collection no generation-1 pass, which would move them on, comes within such a read.)
    gc.collect()
    few = await store.read_mappings("s", limit=LONG_BATCH)
    assert gc.isenabled()
    assert _young(few[0])


@generational
def test_garbage_cycles_moved_to_the_oldest_generation_are_still_collected() -> None:
    gc.enable()

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    gone = weakref.ref(node)
    del node
    paused = pause(LONG_BATCH + 1)
    resume(paused)
    cycle = gone()
    assert cycle is not None
    assert not _young(cycle)  # moved, not freed: only a collection can
    del cycle
    gc.collect(1)  # a young collection no longer sees it...
    assert gone() is not None
    gc.collect()  # ...the next full one does
    assert gone() is None


def _in_a_generation(obj: object) -> bool:
    return any(o is obj for generation in (0, 1, 2) for o in gc.get_objects(generation))


async def test_objects_the_process_froze_stay_frozen(store: EventStore) -> None:
    gc.enable()
    kept = [[i] for i in range(10)]
    gc.freeze()
    assert not _in_a_generation(kept[0])  # frozen: in no generation
    mappings = await store.read_mappings("s")
    assert len(mappings) == 400
    assert gc.get_freeze_count() > 0
    assert not any(_in_a_generation(k) for k in kept)  # not thawed by the read
    assert gc.isenabled()


async def test_a_collector_disabled_by_the_caller_stays_disabled(store: EventStore) -> None:
    gc.disable()
    mappings = await store.read_mappings("s")
    assert not gc.isenabled()
    assert _young(mappings[0])  # nothing was moved either


@generational
def test_pause_and_resume_only_act_on_long_batches_with_the_collector_running() -> None:
    gc.enable()
    assert pause(LONG_BATCH) is False
    assert gc.isenabled()
    resume(False)
    assert gc.isenabled()
    assert pause(LONG_BATCH + 1) is True
    assert not gc.isenabled()
    built = [[i] for i in range(1000)]
    assert _young(built[0])
    resume(True)
    assert gc.isenabled()
    assert not _young(built[0])
    assert gc.get_freeze_count() == 0
