"""Each backend against a model: a list of events and the fold rule, under random operations.

The machine owns its event loop (hypothesis drives synchronous rules), and opens the store with a
small snapshot interval so that snapshots are taken, used and rebuilt all the time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any, ClassVar, TypeVar

import pytest
from _evs_support import BackendTarget, text_event, unique_id
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from eventstore import ConcurrencyError, Event, EventActions, EventStore, fold_state

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

T = TypeVar("T")

MACHINE_SETTINGS = {
    "memory": settings(max_examples=60, stateful_step_count=30, deadline=None),
    "sqlite": settings(max_examples=35, stateful_step_count=25, deadline=None),
    "postgres": settings(max_examples=25, stateful_step_count=25, deadline=None),
}

event_specs = st.tuples(
    st.booleans(),  # with text content
    st.dictionaries(
        st.sampled_from(["a", "b", "nested", "user:u", "app:x", "temp:t"]),
        st.none() | st.integers(-3, 3) | st.dictionaries(st.sampled_from(["x", "y"]),
                                                         st.integers(0, 2), max_size=2),
        max_size=3,
    ),
)
batches = st.lists(event_specs, min_size=1, max_size=4)


class StoreMachine(RuleBasedStateMachine):
    """Compares one session of a real store with a plain list of the events it should hold."""

    target: ClassVar[BackendTarget]
    _ids = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store: EventStore | None = None
        self.app = unique_id("app")
        self.sid = unique_id("s")
        self.model: list[Event] = []
        self.batches: list[tuple[list[Event], list[int]]] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @property
    def live(self) -> EventStore:
        assert self.store is not None
        return self.store

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.run(self.store.aclose())
        finally:
            self.loop.close()

    # -- the model -----------------------------------------------------------------------------

    def expected_state(self, at: int | None = None) -> dict[str, Any]:
        # One session per app and user, so shared keys fold from this session's log alone.
        events = self.model if at is None else self.model[:at]
        return fold_state(e.actions.state_delta for e in events)

    def new_event(self, with_text: bool, delta: dict[str, Any]) -> Event:
        event_id = f"e{next(self._ids)}"
        if with_text:
            return text_event(event_id, id=event_id, actions=EventActions(state_delta=delta))
        return Event(author="agent", id=event_id, actions=EventActions(state_delta=delta))

    # -- rules -------------------------------------------------------------------------------

    @initialize(snapshot_interval=st.integers(1, 4))
    def open(self, snapshot_interval: int) -> None:
        self.snapshot_interval = snapshot_interval
        self.store = self.run(self.target.open(snapshot_interval=snapshot_interval))
        self.run(self.live.create_session(app_name=self.app, user_id="u", session_id=self.sid))

    @rule(specs=batches)
    def append(self, specs: list[tuple[bool, dict[str, Any]]]) -> None:
        batch = [self.new_event(with_text, delta) for with_text, delta in specs]
        version = len(self.model)
        stored = self.run(self.live.append(self.sid, batch, expected_version=version))
        assert [e.seq for e in stored] == list(range(version + 1, version + len(batch) + 1))
        assert [e.id for e in stored] == [e.id for e in batch]
        for event in stored:
            assert not any(k.startswith("temp:") for k in event.actions.state_delta)
        self.model.extend(stored)
        self.batches.append((batch, [e.seq or 0 for e in stored]))

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        batch, seqs = data.draw(st.sampled_from(self.batches), label="batch")
        expected = data.draw(st.none() | st.integers(0, len(self.model) + 2), label="expected")
        stored = self.run(self.live.append(self.sid, batch, expected_version=expected))
        assert [e.seq for e in stored] == seqs
        assert stored == [self.model[s - 1] for s in seqs]

    @rule(data=st.data(), specs=batches)
    def conflicting_append(self, data: st.DataObject, specs: list[tuple[bool, dict[str, Any]]]
                           ) -> None:
        version = len(self.model)
        stale = data.draw(
            st.integers(0, version + 3).filter(lambda v: v != version), label="stale"
        )
        batch = [self.new_event(with_text, delta) for with_text, delta in specs]
        with pytest.raises(ConcurrencyError) as info:
            self.run(self.live.append(self.sid, batch, expected_version=stale))
        error = info.value
        assert (error.session_id, error.expected_version, error.actual_version) == (
            self.sid, stale, version
        )

    @rule(
        after=st.none() | st.integers(0, 40),
        upto=st.none() | st.integers(0, 40),
        backwards=st.booleans(),
        limit=st.none() | st.integers(0, 6),
    )
    def read(self, after: int | None, upto: int | None, backwards: bool,
             limit: int | None) -> None:
        got = self.run(
            self.live.read(self.sid, after=after, upto=upto, backwards=backwards, limit=limit)
        )
        low = after or 0
        high = len(self.model) if upto is None else min(upto, len(self.model))
        expected = self.model[low:high] if high > low else []
        if backwards:
            expected = expected[::-1]
        if limit is not None:
            expected = expected[:limit]
        assert got == expected

    @rule(page_size=st.integers(1, 5), data=st.data())
    def read_backwards_paged(self, page_size: int, data: st.DataObject) -> None:
        stop_at = data.draw(st.integers(0, len(self.model)), label="stop_at")

        async def scan() -> list[int | None]:
            seen = []
            async for event in self.live.iter_backwards(self.sid, page_size=page_size):
                seen.append(event.seq)
                if event.seq == stop_at:
                    break
            return seen

        expected = list(range(len(self.model), max(stop_at, 1) - 1, -1))
        assert self.run(scan()) == expected

    @rule(data=st.data())
    def state_at_seq(self, data: st.DataObject) -> None:
        at = data.draw(st.integers(0, len(self.model)), label="at")
        assert self.run(self.live.state(self.sid, at=at)) == self.expected_state(at)

    @rule()
    def state_at_head(self) -> None:
        expected = self.expected_state()
        assert self.run(self.live.state(self.sid)) == expected
        session = self.run(self.live.get_session(self.sid))
        assert session.state == expected
        assert session.events == self.model
        session_only = {k: v for k, v in expected.items() if ":" not in k}
        assert self.run(self.live.session_state_fold(self.sid)) == session_only

    @rule()
    def rebuild_snapshots(self) -> None:
        self.run(self.live.rebuild_snapshots())
        assert self.run(self.live.state(self.sid)) == self.expected_state()

    @precondition(lambda self: self.target.persistent)
    @rule()
    def reopen(self) -> None:
        self.run(self.live.aclose())
        self.store = self.run(self.target.open(snapshot_interval=self.snapshot_interval))
        assert self.run(self.live.read(self.sid)) == self.model

    @invariant()
    def version_matches(self) -> None:
        if self.store is not None:
            assert self.run(self.live.version(self.sid)) == len(self.model)


def test_state_machine_store_matches_model(backend_target: BackendTarget) -> None:
    machine = type(f"StoreMachine_{backend_target.name}", (StoreMachine,),
                   {"target": backend_target})
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS[backend_target.name])

