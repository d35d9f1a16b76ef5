"""Properties of the hash chain: the hashes appends compute incrementally equal a full
recompute from the stored rows, and every backend (memory, SQLite, PostgreSQL — whose
``evs_append`` chains on the server) stores the same bytes for the same appends."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import Content, Event, EventActions, EventStore, Part, open_store
from eventstore._chain import GENESIS, chain_hashes, content_digest, link

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                max_size=12)
_event = st.builds(
    lambda author, text, delta, ts: Event(
        author=author, timestamp=ts,
        content=None if text is None else Content(role="user", parts=(Part(text=text),)),
        actions=EventActions(state_delta=delta)),
    st.sampled_from(["user", "agent", "ägent"]),
    st.none() | _text,
    st.dictionaries(st.sampled_from(["k", "user:u", "app:a", "temp:t"]),
                    st.integers(-5, 5) | _text, max_size=2),
    st.floats(min_value=0, max_value=2e9, allow_nan=False),
)
_batches = st.lists(st.lists(_event, min_size=1, max_size=4), min_size=1, max_size=5)


async def _chain_of(store: EventStore, batches: list[list[Event]]) -> list[bytes]:
    sid = uuid.uuid4().hex
    await store.create_session(app_name="app", user_id="u", session_id=sid)
    for batch in batches:
        await store.append(sid, batch, expected_version=None)
    rows = await store.backend.read(sid, after=None, upto=None, backwards=False, limit=None)
    stored = [r.chain_hash for r in rows]
    assert stored == chain_hashes(GENESIS, 1, rows)  # incremental == full recompute
    record = await store.backend.get_session(sid)
    assert record is not None
    assert (record.head_seq, record.head_hash) == (len(rows), stored[-1])
    return [h for h in stored if h is not None]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=_batches)
def test_chain_incremental_equals_recompute_and_backends_agree(
    batches: list[list[Event]], tmp_path: Path, postgres_url: str
) -> None:
    async def run() -> list[list[bytes]]:
        out = []
        for url in ("memory://", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}", postgres_url):
            async with await open_store(url, auto_upgrade=True) as store:
                out.append(await _chain_of(store, batches))
        return out

    memory, sqlite, postgres = asyncio.run(run())
    assert memory == sqlite == postgres
    assert len(memory) == sum(len(b) for b in batches)


@given(fields=st.tuples(_text, _text, _text, _text))
def test_chain_framing_keeps_field_boundaries(fields: tuple[str, str, str, str]) -> None:
    """Moving text from one field to its neighbour changes the digest."""
    a, b, c, d = fields

    class Row:
        def __init__(self, event_id: str, invocation_id: str, author: str, kind: str) -> None:
            self.event_id, self.invocation_id, self.author, self.kind = (
                event_id, invocation_id, author, kind)
            self.timestamp, self.shared_state, self.schema_version = 1.0, False, 2
            self.payload = b"{}"

    one: Any = Row(a, b, c, d)
    moved: Any = Row(a + b[:1], b[1:], c, d)
    if b:
        assert content_digest(one) != content_digest(moved)
    assert link(GENESIS, 1, content_digest(one)) != link(GENESIS, 2, content_digest(one))
